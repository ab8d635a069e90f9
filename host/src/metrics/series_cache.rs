//! The series a tool call records, kept by their label values once created: a call finds
//! its counter or histogram with the `&str`s it has, instead of building a label set of
//! owned strings and hashing it into the family each time (ARCHITECTURE.md, "The path of
//! one call"). The family still owns every series; this holds a second handle to each.

use hashbrown::{Equivalent, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::RwLock;

/// The label values of one series, borrowed: up to two names and a number (unused ones
/// are `""` and 0).
#[derive(Debug, Clone, Copy)]
pub(super) struct Labels<'a>(pub &'a str, pub &'a str, pub u32);

#[derive(Debug, PartialEq, Eq)]
struct OwnedLabels(Box<str>, Box<str>, u32);

impl Hash for Labels<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
        self.2.hash(state);
    }
}

// Hashes exactly as the borrowed form, so a lookup by `Labels` finds it.
impl Hash for OwnedLabels {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Labels(&self.0, &self.1, self.2).hash(state);
    }
}

impl Equivalent<OwnedLabels> for Labels<'_> {
    fn equivalent(&self, key: &OwnedLabels) -> bool {
        *key.0 == *self.0 && *key.1 == *self.1 && key.2 == self.2
    }
}

/// Handles of one family's series by label values. Only label values the host resolved
/// (loaded backends' names, their tools, the code table, configured tenants) reach it, so
/// it holds no more series than the family itself.
#[derive(Debug)]
pub(super) struct SeriesCache<M> {
    series: RwLock<HashMap<OwnedLabels, M>>,
}

impl<M> Default for SeriesCache<M> {
    fn default() -> Self {
        Self {
            series: RwLock::new(HashMap::new()),
        }
    }
}

impl<M: Clone> SeriesCache<M> {
    /// The series of `labels`, made by `create` (which asks the family for it) the first
    /// time.
    pub(super) fn get(&self, labels: Labels<'_>, create: impl FnOnce() -> M) -> M {
        if let Ok(series) = self.series.read()
            && let Some(handle) = series.get(&labels)
        {
            return handle.clone();
        }
        let handle = create();
        if let Ok(mut series) = self.series.write() {
            series
                .entry(OwnedLabels(labels.0.into(), labels.1.into(), labels.2))
                .or_insert_with(|| handle.clone());
        }
        handle
    }
}

#[cfg(test)]
mod tests {
    use super::{Labels, SeriesCache};
    use std::cell::Cell;

    #[test]
    fn a_series_is_created_once_per_label_values_and_found_by_borrowed_ones() {
        let cache: SeriesCache<u32> = SeriesCache::default();
        let created = Cell::new(0);
        let make = |n| {
            created.set(created.get() + 1);
            n
        };
        assert_eq!(cache.get(Labels("echo", "ping", 0), || make(1)), 1);
        let backend = String::from("echo");
        assert_eq!(cache.get(Labels(&backend, "ping", 0), || make(2)), 1);
        assert_eq!(cache.get(Labels("echo", "ping", 4000), || make(3)), 3);
        // The split between the two names is part of the key.
        assert_eq!(cache.get(Labels("echop", "ing", 0), || make(4)), 4);
        assert_eq!(cache.get(Labels("echo", "", 0), || make(5)), 5);
        assert_eq!(created.get(), 4);
    }
}

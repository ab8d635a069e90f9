//! The series a tool call records, kept by their label values once created: a call finds
//! its counter or histogram with the `&str`s it has, instead of building a label set of
//! owned strings and hashing it into the family each time (ARCHITECTURE.md, "The path of
//! one call"). The family still owns every series; this holds a second handle to each.

use hashbrown::{Equivalent, HashMap};
use prometheus_client::metrics::family::{Family, MetricConstructor};
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
    /// Runs `record` on the series of `labels`, made by `create` (which asks the family for
    /// it) the first time. A known series is used under the read lock, with no handle
    /// cloned.
    pub(super) fn with<R>(
        &self,
        labels: Labels<'_>,
        create: impl FnOnce() -> M,
        record: impl FnOnce(&M) -> R,
    ) -> R {
        if let Ok(series) = self.series.read()
            && let Some(handle) = series.get(&labels)
        {
            return record(handle);
        }
        let handle = create();
        if let Ok(mut series) = self.series.write() {
            series
                .entry(OwnedLabels(labels.0.into(), labels.1.into(), labels.2))
                .or_insert_with(|| handle.clone());
        }
        record(&handle)
    }
}

/// A metric family with its [`SeriesCache`]: a recorder passes the label values it has as
/// [`Labels`], and the owned label set (for the family, the first time only) as a closure.
#[derive(Debug)]
pub(super) struct CachedFamily<L, M, C = fn() -> M> {
    family: Family<L, M, C>,
    cache: SeriesCache<M>,
}

impl<L, M, C> CachedFamily<L, M, C>
where
    L: Clone + Hash + Eq,
    M: Clone,
    C: MetricConstructor<M> + Clone,
{
    /// The family, cached.
    pub(super) fn new(family: Family<L, M, C>) -> Self {
        Self {
            family,
            cache: SeriesCache::default(),
        }
    }

    /// A handle to the family (the registry holds another, registered before it was
    /// cached), to read what a scrape would.
    #[cfg(test)]
    pub(super) fn family(&self) -> Family<L, M, C> {
        self.family.clone()
    }

    /// Runs `record` on the series of `labels`; `owned` builds the family's label set for
    /// the same values the first time they are seen.
    pub(super) fn with<R>(
        &self,
        labels: Labels<'_>,
        owned: impl FnOnce() -> L,
        record: impl FnOnce(&M) -> R,
    ) -> R {
        self.cache
            .with(labels, || self.family.get_or_create_owned(&owned()), record)
    }
}

#[cfg(test)]
mod tests {
    use super::{CachedFamily, Labels, SeriesCache};
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use std::cell::Cell;

    #[test]
    fn a_series_is_created_once_per_label_values_and_found_by_borrowed_ones() {
        let cache: SeriesCache<u32> = SeriesCache::default();
        let created = Cell::new(0);
        let make = |n| {
            created.set(created.get() + 1);
            n
        };
        let get = |labels, n| cache.with(labels, || make(n), |m| *m);
        assert_eq!(get(Labels("echo", "ping", 0), 1), 1);
        let backend = String::from("echo");
        assert_eq!(get(Labels(&backend, "ping", 0), 2), 1);
        assert_eq!(get(Labels("echo", "ping", 4000), 3), 3);
        // The split between the two names is part of the key.
        assert_eq!(get(Labels("echop", "ing", 0), 4), 4);
        assert_eq!(get(Labels("echo", "", 0), 5), 5);
        assert_eq!(created.get(), 4);
    }

    #[test]
    fn a_cached_family_records_into_the_familys_own_series() {
        let cached: CachedFamily<Vec<(String, String)>, Counter> =
            CachedFamily::new(Family::default());
        let owned = |b: &str| vec![("backend".to_string(), b.to_string())];
        for _ in 0..3 {
            cached.with(Labels("echo", "", 0), || owned("echo"), |c| c.inc());
        }
        cached.with(Labels("other", "", 0), || owned("other"), |c| c.inc());
        // The family (what a scrape reads) holds the same series the cache found.
        assert_eq!(cached.family().get_or_create(&owned("echo")).get(), 3);
        assert_eq!(cached.family().get_or_create(&owned("other")).get(), 1);
    }
}

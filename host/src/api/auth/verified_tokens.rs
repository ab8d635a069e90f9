//! Access tokens already verified, with the caller each names, kept until they expire so
//! a token seen again costs a map lookup instead of a signature check. Keyed by the whole
//! token (compared in full, so no collision can stand in for a verification); bounded:
//! when full, expired entries go, and if none had expired, everything goes.

use super::Caller;
use std::collections::HashMap;
use std::sync::Mutex;

/// Verified tokens and their callers.
pub struct VerifiedTokens {
    capacity: usize,
    held: Mutex<HashMap<Box<str>, (Caller, u64)>>,
}

impl VerifiedTokens {
    /// An empty cache of at most `capacity` tokens (0 keeps none).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The caller of `token` if it was verified and is still valid at `now` (Unix seconds).
    pub fn get(&self, token: &str, now: u64) -> Option<Caller> {
        let held = self.held.lock().ok()?;
        held.get(token)
            .filter(|(_, until)| now <= *until)
            .map(|(caller, _)| caller.clone())
    }

    /// Keeps `token`'s caller until `until` (Unix seconds).
    pub fn insert(&self, token: &str, caller: Caller, until: u64, now: u64) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        if held.len() >= self.capacity && !held.contains_key(token) {
            held.retain(|_, (_, u)| now <= *u);
            if held.len() >= self.capacity {
                held.clear();
            }
        }
        held.insert(token.into(), (caller, until));
    }

    /// How many tokens are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.lock().map_or(0, |h| h.len())
    }

    /// Whether none is held.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_until_they_expire_and_the_cache_stays_bounded() {
        let cache = VerifiedTokens::new(3);
        let caller = Caller::anonymous();
        cache.insert("a", caller.clone(), 100, 10);
        assert!(cache.get("a", 100).is_some());
        assert!(cache.get("a", 101).is_none(), "past its expiry");
        assert!(cache.get("b", 50).is_none());
        cache.insert("b", caller.clone(), 20, 10);
        cache.insert("c", caller.clone(), 200, 10);
        // Full: the expired `b` makes room.
        cache.insert("d", caller.clone(), 200, 30);
        assert_eq!(cache.len(), 3);
        assert!(cache.get("b", 15).is_none() && cache.get("a", 30).is_some());
        // Full with nothing expired: cleared, never over capacity.
        cache.insert("e", caller.clone(), 200, 30);
        assert!(cache.len() <= 3);
        assert!(cache.get("e", 30).is_some());
        let none = VerifiedTokens::new(0);
        none.insert("a", caller, 100, 10);
        assert!(none.is_empty());
    }
}

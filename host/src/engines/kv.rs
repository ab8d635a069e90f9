//! What the `kv` import asks of a key-value store: values under (backend, scope, key),
//! written atomically where it matters, and the usage a scope's quota is checked against.
//! The state store implements it (`store::StateStore`); [`DisabledKvStore`] stands in on a
//! host without one.

use crate::error_code::{Code, WharfError};
use async_trait::async_trait;

/// Whose state: the backend's, or one session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvScope {
    /// Shared by every session of the backend.
    Backend,
    /// One session's.
    Session(String),
}

/// A key-value store, partitioned by backend and scope.
#[async_trait]
pub trait KvStore: std::fmt::Debug + Send + Sync {
    /// One value.
    async fn get(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
    ) -> Result<Option<Vec<u8>>, WharfError>;

    /// Sets a value.
    async fn set(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<(), WharfError>;

    /// Deletes a value (absent is fine).
    async fn delete(&self, backend: &str, scope: &KvScope, key: &str) -> Result<(), WharfError>;

    /// Stores `value` under `key` only if the key is absent; true when stored.
    async fn insert_if_absent(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<bool, WharfError>;

    /// Replaces the value under `key` with `new` (deletes it when `None`) only if it is
    /// `expected` now, atomically; true when replaced.
    async fn replace_if(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        expected: &[u8],
        new: Option<&[u8]>,
    ) -> Result<bool, WharfError>;

    /// Keys starting with `prefix`, sorted.
    async fn keys(
        &self,
        backend: &str,
        scope: &KvScope,
        prefix: &str,
    ) -> Result<Vec<String>, WharfError>;

    /// Keys and bytes (keys plus values) used by one scope, leaving out `except`.
    async fn usage_except(
        &self,
        backend: &str,
        scope: &KvScope,
        except: &str,
    ) -> Result<(u64, u64), WharfError>;
}

/// The store of a host that has none: every method answers 5012 (not retryable).
#[derive(Debug, Clone, Copy, Default)]
pub struct DisabledKvStore;

fn not_configured() -> WharfError {
    WharfError::new(
        Code::DependencyFailure,
        "no key-value store is configured on this host",
    )
    .retryable(false)
}

#[async_trait]
impl KvStore for DisabledKvStore {
    async fn get(&self, _: &str, _: &KvScope, _: &str) -> Result<Option<Vec<u8>>, WharfError> {
        Err(not_configured())
    }

    async fn set(&self, _: &str, _: &KvScope, _: &str, _: &[u8]) -> Result<(), WharfError> {
        Err(not_configured())
    }

    async fn delete(&self, _: &str, _: &KvScope, _: &str) -> Result<(), WharfError> {
        Err(not_configured())
    }

    async fn insert_if_absent(
        &self,
        _: &str,
        _: &KvScope,
        _: &str,
        _: &[u8],
    ) -> Result<bool, WharfError> {
        Err(not_configured())
    }

    async fn replace_if(
        &self,
        _: &str,
        _: &KvScope,
        _: &str,
        _: &[u8],
        _: Option<&[u8]>,
    ) -> Result<bool, WharfError> {
        Err(not_configured())
    }

    async fn keys(&self, _: &str, _: &KvScope, _: &str) -> Result<Vec<String>, WharfError> {
        Err(not_configured())
    }

    async fn usage_except(&self, _: &str, _: &KvScope, _: &str) -> Result<(u64, u64), WharfError> {
        Err(not_configured())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_disabled_store_answers_5012_to_everything() {
        let kv: &dyn KvStore = &DisabledKvStore;
        let s = &KvScope::Backend;
        let errors = [
            kv.get("b", s, "k").await.unwrap_err(),
            kv.set("b", s, "k", b"v").await.unwrap_err(),
            kv.delete("b", s, "k").await.unwrap_err(),
            kv.insert_if_absent("b", s, "k", b"v").await.unwrap_err(),
            kv.replace_if("b", s, "k", b"v", None).await.unwrap_err(),
            kv.keys("b", s, "").await.unwrap_err(),
            kv.usage_except("b", s, "k").await.unwrap_err(),
        ];
        for e in errors {
            assert_eq!(
                (e.code, e.retryable),
                (Code::DependencyFailure, false),
                "{}",
                e.message
            );
        }
    }
}

/// The writes of this node that are checking a scope's quota and writing, by backend and
/// scope: a quota check and its write run one at a time per scope, so concurrent sets cannot
/// each see room for themselves and together overshoot the scope's bytes (nodes sharing a
/// store can still race each other by one write each).
#[derive(Debug, Default)]
pub struct ScopeWrites(
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
);

impl ScopeWrites {
    /// The lock of the scope named `key`.
    pub fn lock_for(&self, key: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        match self.0.lock() {
            Ok(mut map) => map.entry(key.to_string()).or_default().clone(),
            Err(_) => std::sync::Arc::default(),
        }
    }

    /// Forgets `key`'s lock once nobody holds or waits for it.
    pub fn forget_unused(&self, key: &str) {
        if let Ok(mut map) = self.0.lock()
            && map
                .get(key)
                .is_some_and(|lock| std::sync::Arc::strong_count(lock) == 1)
        {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod scope_write_tests {
    use super::ScopeWrites;

    #[test]
    fn a_scope_lock_is_forgotten_only_when_unused() {
        let writes = ScopeWrites::default();
        let held = writes.lock_for("a");
        writes.forget_unused("a");
        assert!(
            std::sync::Arc::ptr_eq(&held, &writes.lock_for("a")),
            "kept while held"
        );
        drop(held);
        writes.forget_unused("a");
        assert_eq!(writes.0.lock().unwrap().len(), 0, "forgotten once unused");
    }
}

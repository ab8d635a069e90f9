//! Key-value state of backends (the `kv` import), per backend or per session.

use super::{StateStore, unavailable};
use crate::engines::kv::{KvScope, KvStore};
use crate::error_code::WharfError;
use async_trait::async_trait;
use sqlx::Row;

/// How a scope is written in the `scope` column.
trait Column {
    fn column(&self) -> String;
}

impl Column for KvScope {
    fn column(&self) -> String {
        match self {
            KvScope::Backend => "backend".to_string(),
            KvScope::Session(id) => format!("session:{id}"),
        }
    }
}

impl StateStore {
    /// One value.
    #[tracing::instrument(name = "store.kv_get", level = "debug", skip_all)]
    pub async fn kv_get(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
    ) -> Result<Option<Vec<u8>>, WharfError> {
        let row =
            sqlx::query("SELECT v FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3")
                .bind(backend)
                .bind(scope.column())
                .bind(key)
                .fetch_optional(self.pool())
                .await
                .map_err(unavailable)?;
        row.map(|r| r.try_get::<Vec<u8>, _>("v").map_err(unavailable))
            .transpose()
    }

    /// Sets a value.
    #[tracing::instrument(name = "store.kv_set", level = "debug", skip_all)]
    pub async fn kv_set(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<(), WharfError> {
        self.run(
            sqlx::query(
                "INSERT INTO wharf_kv (backend, scope, k, v) VALUES ($1, $2, $3, $4)
             ON CONFLICT (backend, scope, k) DO UPDATE SET v = excluded.v",
            )
            .bind(backend)
            .bind(scope.column())
            .bind(key)
            .bind(value.to_vec()),
        )
        .await
    }

    /// Deletes a value (absent is fine).
    #[tracing::instrument(name = "store.kv_delete", level = "debug", skip_all)]
    pub async fn kv_delete(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
    ) -> Result<(), WharfError> {
        self.run(
            sqlx::query("DELETE FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3")
                .bind(backend)
                .bind(scope.column())
                .bind(key),
        )
        .await
    }

    /// Stores `value` under `key` only if the key is absent; true when stored.
    #[tracing::instrument(name = "store.kv_insert_if_absent", level = "debug", skip_all)]
    pub async fn kv_insert_if_absent(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "INSERT INTO wharf_kv (backend, scope, k, v) VALUES ($1, $2, $3, $4)
             ON CONFLICT (backend, scope, k) DO NOTHING",
            )
            .bind(backend)
            .bind(scope.column())
            .bind(key)
            .bind(value.to_vec()),
        )
        .await
    }

    /// Replaces the value under `key` with `new` (deletes it when `None`) only if it is
    /// `expected` now; true when replaced. One statement, so atomic on both engines.
    #[tracing::instrument(name = "store.kv_replace_if", level = "debug", skip_all)]
    pub async fn kv_replace_if(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        expected: &[u8],
        new: Option<&[u8]>,
    ) -> Result<bool, WharfError> {
        let query = match new {
            Some(value) => sqlx::query(
                "UPDATE wharf_kv SET v = $5 WHERE backend = $1 AND scope = $2 AND k = $3 AND v = $4",
            )
            .bind(backend)
            .bind(scope.column())
            .bind(key)
            .bind(expected.to_vec())
            .bind(value.to_vec()),
            None => sqlx::query(
                "DELETE FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3 AND v = $4",
            )
            .bind(backend)
            .bind(scope.column())
            .bind(key)
            .bind(expected.to_vec()),
        };
        self.changed_one(query).await
    }

    /// Keys starting with `prefix`, sorted.
    #[tracing::instrument(name = "store.kv_keys", level = "debug", skip_all)]
    pub async fn kv_keys(
        &self,
        backend: &str,
        scope: &KvScope,
        prefix: &str,
    ) -> Result<Vec<String>, WharfError> {
        let rows =
            sqlx::query("SELECT k FROM wharf_kv WHERE backend = $1 AND scope = $2 ORDER BY k")
                .bind(backend)
                .bind(scope.column())
                .fetch_all(self.pool())
                .await
                .map_err(unavailable)?;
        let mut keys = Vec::new();
        for row in rows {
            let k: String = row.try_get("k").map_err(unavailable)?;
            if k.starts_with(prefix) {
                keys.push(k);
            }
        }
        Ok(keys)
    }

    /// Keys and bytes (UTF-8 bytes of the keys plus the values) used by one scope, leaving out `except` (the key
    /// about to be written), for quotas: one aggregate query.
    #[tracing::instrument(name = "store.kv_usage_except", level = "debug", skip_all)]
    pub async fn kv_usage_except(
        &self,
        backend: &str,
        scope: &KvScope,
        except: &str,
    ) -> Result<(u64, u64), WharfError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(SUM(OCTET_LENGTH(k) + OCTET_LENGTH(v)), 0) AS bytes
             FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k <> $3",
        )
        .bind(backend)
        .bind(scope.column())
        .bind(except)
        .fetch_one(self.pool())
        .await
        .map_err(unavailable)?;
        let n: i64 = row.try_get("n").map_err(unavailable)?;
        let bytes: i64 = row.try_get("bytes").map_err(unavailable)?;
        Ok((n.max(0) as u64, bytes.max(0) as u64))
    }

    /// Removes a session's key-value state.
    #[tracing::instrument(name = "store.kv_drop_session", level = "debug", skip_all)]
    pub async fn kv_drop_session(&self, backend: &str, session: &str) -> Result<(), WharfError> {
        self.run(
            sqlx::query("DELETE FROM wharf_kv WHERE backend = $1 AND scope = $2")
                .bind(backend)
                .bind(KvScope::Session(session.to_string()).column()),
        )
        .await
    }
}

/// The `kv` import's store: the rows above.
#[async_trait]
impl KvStore for StateStore {
    async fn get(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
    ) -> Result<Option<Vec<u8>>, WharfError> {
        self.kv_get(backend, scope, key).await
    }

    async fn set(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<(), WharfError> {
        self.kv_set(backend, scope, key, value).await
    }

    async fn delete(&self, backend: &str, scope: &KvScope, key: &str) -> Result<(), WharfError> {
        self.kv_delete(backend, scope, key).await
    }

    async fn insert_if_absent(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<bool, WharfError> {
        self.kv_insert_if_absent(backend, scope, key, value).await
    }

    async fn replace_if(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        expected: &[u8],
        new: Option<&[u8]>,
    ) -> Result<bool, WharfError> {
        self.kv_replace_if(backend, scope, key, expected, new).await
    }

    async fn keys(
        &self,
        backend: &str,
        scope: &KvScope,
        prefix: &str,
    ) -> Result<Vec<String>, WharfError> {
        self.kv_keys(backend, scope, prefix).await
    }

    async fn usage_except(
        &self,
        backend: &str,
        scope: &KvScope,
        except: &str,
    ) -> Result<(u64, u64), WharfError> {
        self.kv_usage_except(backend, scope, except).await
    }
}

//! Key-value state of backends (the `kv` import), per backend or per session.

use super::{StateStore, Statement, column, unavailable};
use crate::engines::kv::{KvScope, KvStore};
use crate::error_code::WharfError;
use async_trait::async_trait;

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

/// `sql` with one key's address bound: `backend`, `scope` and `key` as `$1`, `$2` and `$3`.
fn keyed<'q>(sql: &'q str, backend: &'q str, scope: &KvScope, key: &'q str) -> Statement<'q> {
    sqlx::query(sql)
        .bind(backend)
        .bind(scope.column())
        .bind(key)
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
        let sql = "SELECT v FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3";
        self.fetch_optional(keyed(sql, backend, scope, key), |row| column(row, "v"))
            .await
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
        let sql = "INSERT INTO wharf_kv (backend, scope, k, v) VALUES ($1, $2, $3, $4)
             ON CONFLICT (backend, scope, k) DO UPDATE SET v = excluded.v";
        self.run(keyed(sql, backend, scope, key).bind(value.to_vec()))
            .await
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
        let sql =
            "SELECT COUNT(*) AS n, COALESCE(SUM(OCTET_LENGTH(k) + OCTET_LENGTH(v)), 0) AS bytes
             FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k <> $3";
        let row = keyed(sql, backend, scope, except)
            .fetch_one(self.pool())
            .await
            .map_err(unavailable)?;
        let n: i64 = column(&row, "n")?;
        let bytes: i64 = column(&row, "bytes")?;
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

/// The `kv` import's store: the rows above. The host's own code and the tests read and
/// write through the methods above by name; what only the import asks is here alone.
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

    /// Deletes a value (absent is fine).
    #[tracing::instrument(name = "store.kv_delete", level = "debug", skip_all)]
    async fn delete(&self, backend: &str, scope: &KvScope, key: &str) -> Result<(), WharfError> {
        let sql = "DELETE FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3";
        self.run(keyed(sql, backend, scope, key)).await
    }

    /// Stores `value` under `key` only if the key is absent; true when stored.
    #[tracing::instrument(name = "store.kv_insert_if_absent", level = "debug", skip_all)]
    async fn insert_if_absent(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        value: &[u8],
    ) -> Result<bool, WharfError> {
        let sql = "INSERT INTO wharf_kv (backend, scope, k, v) VALUES ($1, $2, $3, $4)
             ON CONFLICT (backend, scope, k) DO NOTHING";
        self.changed_one(keyed(sql, backend, scope, key).bind(value.to_vec()))
            .await
    }

    /// Replaces the value under `key` with `new` (deletes it when `None`) only if it is
    /// `expected` now; true when replaced. One statement, so atomic on both engines.
    #[tracing::instrument(name = "store.kv_replace_if", level = "debug", skip_all)]
    async fn replace_if(
        &self,
        backend: &str,
        scope: &KvScope,
        key: &str,
        expected: &[u8],
        new: Option<&[u8]>,
    ) -> Result<bool, WharfError> {
        let if_expected = |sql| keyed(sql, backend, scope, key).bind(expected.to_vec());
        let statement = match new {
            Some(value) => if_expected(
                "UPDATE wharf_kv SET v = $5 WHERE backend = $1 AND scope = $2 AND k = $3 AND v = $4",
            )
            .bind(value.to_vec()),
            None => if_expected(
                "DELETE FROM wharf_kv WHERE backend = $1 AND scope = $2 AND k = $3 AND v = $4",
            ),
        };
        self.changed_one(statement).await
    }

    /// Keys starting with `prefix`, sorted.
    #[tracing::instrument(name = "store.kv_keys", level = "debug", skip_all)]
    async fn keys(
        &self,
        backend: &str,
        scope: &KvScope,
        prefix: &str,
    ) -> Result<Vec<String>, WharfError> {
        let statement =
            sqlx::query("SELECT k FROM wharf_kv WHERE backend = $1 AND scope = $2 ORDER BY k")
                .bind(backend)
                .bind(scope.column());
        let keys: Vec<String> = self.fetch_all(statement, |row| column(row, "k")).await?;
        Ok(keys.into_iter().filter(|k| k.starts_with(prefix)).collect())
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

//! Backend locks: one row per backend while a node counts its containers and creates one,
//! so nodes sharing the store cannot each count the same free slot. A row is taken with
//! one compare-and-set statement (free, or its lease ran out: a node that died holding it
//! blocks the backend's creates only until then) and deleted by its holder.

use super::{StateStore, unavailable};
use crate::error_code::WharfError;

impl StateStore {
    /// Takes `backend`'s lock for `holder` until `until_ms` unless someone else holds it
    /// with a lease still running at `now_ms`; true when taken.
    pub async fn try_lock_backend(
        &self,
        backend: &str,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool, WharfError> {
        let done = sqlx::query(
            "INSERT INTO wharf_backend_locks (backend, holder, lease_until) VALUES ($1, $2, $3)
             ON CONFLICT (backend) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
             WHERE wharf_backend_locks.lease_until < $4",
        )
        .bind(backend)
        .bind(holder)
        .bind(until_ms)
        .bind(now_ms)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives `backend`'s lock back if `holder` still holds it.
    pub async fn unlock_backend(&self, backend: &str, holder: &str) -> Result<(), WharfError> {
        sqlx::query("DELETE FROM wharf_backend_locks WHERE backend = $1 AND holder = $2")
            .bind(backend)
            .bind(holder)
            .execute(self.pool())
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

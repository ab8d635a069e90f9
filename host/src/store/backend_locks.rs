//! Backend locks: one row per backend while a node counts its containers and creates one,
//! so nodes sharing the store cannot each count the same free slot. A row is taken with
//! one compare-and-set statement and deleted by its holder. A row is free when its lease ran
//! out, or when the node that holds it is no longer alive in that incarnation (its node
//! lease ran out, or it restarted with another boot id), so a node killed mid-create
//! blocks the backend's creates only until its node lease runs out. The container import
//! reaches these rows through the `engines::CreateLedger` seam.

use super::StateStore;
use crate::engines::CreateLedger;
use crate::error_code::WharfError;
use async_trait::async_trait;
use std::collections::HashSet;

/// The lock rows, behind the seam the container import's create turns see
/// (`engines::CreateLedger`); the tenants' session-quota locks use the same rows.
#[async_trait]
impl CreateLedger for StateStore {
    /// Takes `backend`'s lock for `holder` (on `node`, in this store's incarnation) until
    /// `until_ms` unless a live node holds it with a lease still running at `now_ms`; true
    /// when taken.
    #[tracing::instrument(name = "store.try_lock_backend", level = "debug", skip_all)]
    async fn try_lock_backend(
        &self,
        backend: &str,
        holder: &str,
        node: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "INSERT INTO wharf_backend_locks (backend, holder, node, boot, lease_until)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (backend) DO UPDATE SET holder = excluded.holder, node = excluded.node,
                 boot = excluded.boot, lease_until = excluded.lease_until
             WHERE wharf_backend_locks.lease_until < $6
                OR NOT EXISTS (SELECT 1 FROM wharf_nodes n
                               WHERE n.id = wharf_backend_locks.node
                                 AND n.boot = wharf_backend_locks.boot
                                 AND n.lease_until >= $6)",
            )
            .bind(backend)
            .bind(holder)
            .bind(node)
            .bind(self.boot())
            .bind(until_ms)
            .bind(now_ms),
        )
        .await
    }

    /// Gives `backend`'s lock back if `holder` still holds it.
    #[tracing::instrument(name = "store.unlock_backend", level = "debug", skip_all)]
    async fn unlock_backend(&self, backend: &str, holder: &str) -> Result<(), WharfError> {
        self.run(
            sqlx::query("DELETE FROM wharf_backend_locks WHERE backend = $1 AND holder = $2")
                .bind(backend)
                .bind(holder),
        )
        .await
    }

    async fn tenant_sessions(
        &self,
        tenant: &str,
        backend: Option<&str>,
    ) -> Result<HashSet<String>, WharfError> {
        Ok(self
            .list_sessions(Some(tenant), backend, None)
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect())
    }
}

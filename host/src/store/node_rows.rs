//! Node leases: every Wharf process heartbeats its id; a node whose lease ran out is gone,
//! and its orphaned containers may be reaped.

use super::{StateStore, column};
use crate::error_code::WharfError;

impl StateStore {
    /// Records that `node` (in this store's incarnation, its boot id) is alive until
    /// `lease_until` (ms).
    #[tracing::instrument(name = "store.heartbeat", level = "debug", skip_all)]
    pub async fn heartbeat(
        &self,
        node: &str,
        lease_until: i64,
        now: i64,
    ) -> Result<(), WharfError> {
        self.run(sqlx::query(
            "INSERT INTO wharf_nodes (id, lease_until, started_at, boot) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until, boot = excluded.boot",
        )
        .bind(node)
        .bind(lease_until)
        .bind(now)
        .bind(self.boot())).await
    }

    /// Every node this store has heard of, with the end of its lease (ms).
    #[tracing::instrument(name = "store.known_nodes", level = "debug", skip_all)]
    pub async fn known_nodes(&self) -> Result<std::collections::HashMap<String, i64>, WharfError> {
        let statement = sqlx::query("SELECT id, lease_until FROM wharf_nodes");
        self.fetch_all(statement, |row| {
            Ok((column(row, "id")?, column(row, "lease_until")?))
        })
        .await
    }
}

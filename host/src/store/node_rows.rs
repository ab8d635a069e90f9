//! Node leases: every Wharf process heartbeats its id; a node whose lease ran out is gone,
//! and its orphaned containers may be reaped.

use super::{StateStore, unavailable};
use crate::error_code::WharfError;
use sqlx::Row;

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
        let rows = sqlx::query("SELECT id, lease_until FROM wharf_nodes")
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("id").map_err(unavailable)?,
                    r.try_get::<i64, _>("lease_until").map_err(unavailable)?,
                ))
            })
            .collect()
    }
}

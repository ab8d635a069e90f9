//! Node leases: every Wharf process heartbeats its id; a node whose lease ran out is gone,
//! and its orphaned containers may be reaped.

use super::{StateStore, unavailable};
use crate::error_code::WharfError;
use sqlx::Row;

impl StateStore {
    /// Records that `node` is alive until `lease_until` (ms).
    pub async fn heartbeat(&self, node: &str, lease_until: i64, now: i64) -> Result<(), WharfError> {
        sqlx::query(
            "INSERT INTO wharf_nodes (id, lease_until, started_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until",
        )
        .bind(node)
        .bind(lease_until)
        .bind(now)
        .execute(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    /// Nodes whose lease has not run out at `now`.
    pub async fn live_nodes(&self, now: i64) -> Result<Vec<String>, WharfError> {
        let rows = sqlx::query("SELECT id FROM wharf_nodes WHERE lease_until >= $1")
            .bind(now)
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        rows.iter().map(|r| r.try_get::<String, _>("id").map_err(unavailable)).collect()
    }
}

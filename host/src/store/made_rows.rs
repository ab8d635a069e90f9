//! What the tables of things made in two steps share: a row is written `making` before the
//! engine makes its thing (so a crash leaves a row the sweep finishes), then marked
//! `ready`. Snapshots and volumes are such tables; each module names its table here once.

use super::{StateStore, of_tenant};
use crate::error_code::WharfError;
use sqlx::any::AnyRow;

/// One table of things made in two steps.
pub(super) struct MadeTable<R> {
    /// The table.
    pub(super) name: &'static str,
    /// The columns a record is read from.
    pub(super) columns: &'static str,
    /// Reads a record from those columns.
    pub(super) record: fn(&AnyRow) -> Result<R, WharfError>,
}

impl StateStore {
    /// Row `id` of `table`.
    pub(super) async fn made_get<R>(
        &self,
        table: &MadeTable<R>,
        id: &str,
    ) -> Result<Option<R>, WharfError> {
        let sql = format!("SELECT {} FROM {} WHERE id = $1", table.columns, table.name);
        self.fetch_optional(sqlx::query(&sql).bind(id), table.record)
            .await
    }

    /// The rows of `tenant` (every tenant's with `None`) in `table`, oldest first.
    pub(super) async fn made_list<R>(
        &self,
        table: &MadeTable<R>,
        tenant: Option<&str>,
    ) -> Result<Vec<R>, WharfError> {
        let sql = format!(
            "SELECT {} FROM {} WHERE ($1 = '' OR tenant = $2) ORDER BY created_at, id",
            table.columns, table.name
        );
        self.fetch_all(of_tenant(sqlx::query(&sql), tenant), table.record)
            .await
    }

    /// Forgets row `id` of `table`.
    pub(super) async fn made_delete<R>(
        &self,
        table: &MadeTable<R>,
        id: &str,
    ) -> Result<(), WharfError> {
        let sql = format!("DELETE FROM {} WHERE id = $1", table.name);
        self.run(sqlx::query(&sql).bind(id)).await
    }

    /// The `making` rows of `table` nobody finishes: made by an earlier incarnation of
    /// `node`, or started before `stuck_before` (ms).
    pub(super) async fn made_abandoned<R>(
        &self,
        table: &MadeTable<R>,
        node: &str,
        stuck_before: u64,
    ) -> Result<Vec<R>, WharfError> {
        let sql = format!(
            "SELECT {} FROM {}
             WHERE state = 'making' AND ((node = $1 AND boot <> $2) OR created_at < $3)",
            table.columns, table.name
        );
        self.fetch_all(self.of_node_before(&sql, node, stuck_before), table.record)
            .await
    }
}

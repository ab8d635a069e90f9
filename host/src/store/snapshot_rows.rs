//! Snapshot rows: one per snapshot image, `making` while its commit runs (written before
//! the commit, so a crash leaves a row the sweep finishes: its image, if any, removed), then
//! `ready` with the bytes it added. A tenant's count is checked in the insert itself, so it
//! holds across nodes.

use super::made_rows::MadeTable;
use super::{Columns, StateStore, of_tenant};
use crate::bounded::{from_column, to_column};
use crate::error_code::WharfError;
use crate::snapshot_record::{SnapshotRecord, SnapshotState};
use sqlx::any::AnyRow;

const COLUMNS: &str =
    "id, tenant, backend, name, image, origin, bytes, state, created_at, archive_of";

/// The table, as the shared reads of `made_rows` see it.
const TABLE: MadeTable<SnapshotRecord> = MadeTable {
    name: "wharf_snapshots",
    columns: COLUMNS,
    record,
};

fn record(row: &AnyRow) -> Result<SnapshotRecord, WharfError> {
    let c = Columns::of(row, "snapshot");
    Ok(SnapshotRecord {
        id: c.get("id")?,
        tenant: c.get("tenant")?,
        backend: c.get("backend")?,
        name: c.get("name")?,
        image: c.get("image")?,
        origin_session: c.get("origin")?,
        bytes: c.number("bytes")?,
        state: c.state(SnapshotState::parse)?,
        created_at_ms: c.number("created_at")?,
        archive_of: c.get("archive_of")?,
    })
}

impl StateStore {
    /// Records a snapshot about to be made (`making`, held by this node's incarnation),
    /// unless its tenant already has `max_count`; true when recorded.
    #[tracing::instrument(name = "store.insert_snapshot", level = "debug", skip_all)]
    pub async fn insert_snapshot(
        &self,
        s: &SnapshotRecord,
        node: &str,
        max_count: u64,
    ) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(
            "INSERT INTO wharf_snapshots (id, tenant, backend, name, image, origin, bytes, state, node, boot, created_at, archive_of)
             SELECT $1, $2, $3, $4, $5, $6, 0, 'making', $7, $8, $9, $12
             WHERE (SELECT COUNT(*) FROM wharf_snapshots WHERE tenant = $10) < $11",
        )
        .bind(&s.id)
        .bind(&s.tenant)
        .bind(&s.backend)
        .bind(&s.name)
        .bind(&s.image)
        .bind(&s.origin_session)
        .bind(node)
        .bind(self.boot())
        .bind(to_column(s.created_at_ms))
        .bind(&s.tenant)
        .bind(to_column(max_count))
        .bind(s.archive_of.clone())).await
    }

    /// `making` → `ready` with the bytes it added.
    pub async fn mark_snapshot_ready(&self, id: &str, bytes: u64) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(
            "UPDATE wharf_snapshots SET state = 'ready', bytes = $1 WHERE id = $2 AND state = 'making'",
        )
        .bind(to_column(bytes))
        .bind(id)).await
    }

    /// One snapshot.
    pub async fn get_snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>, WharfError> {
        self.made_get(&TABLE, id).await
    }

    /// The snapshots of `tenant` (every tenant's with `None`), oldest first.
    pub async fn list_snapshots(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<SnapshotRecord>, WharfError> {
        self.made_list(&TABLE, tenant).await
    }

    /// Ready snapshots per tenant (of `tenant` only, when given): (tenant, count, bytes).
    pub async fn snapshot_usage(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<(String, u64, u64)>, WharfError> {
        let sql = "SELECT tenant, COUNT(*) AS n, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS b
             FROM wharf_snapshots WHERE state = 'ready' AND ($1 = '' OR tenant = $2)
             GROUP BY tenant ORDER BY tenant";
        self.fetch_all(of_tenant(sqlx::query(sql), tenant), |row| {
            let c = Columns::of(row, "snapshot");
            let count = |name: &str| -> Result<u64, WharfError> {
                Ok(from_column(c.get(name)?, i64::MAX as u64).unwrap_or(0))
            };
            Ok((c.get("tenant")?, count("n")?, count("b")?))
        })
        .await
    }

    /// Forgets a snapshot.
    pub async fn delete_snapshot(&self, id: &str) -> Result<(), WharfError> {
        self.made_delete(&TABLE, id).await
    }

    /// `making` rows nobody finishes: made by an earlier incarnation of `node`, or started
    /// before `stuck_before` (ms).
    pub async fn abandoned_snapshots(
        &self,
        node: &str,
        stuck_before: u64,
    ) -> Result<Vec<SnapshotRecord>, WharfError> {
        self.made_abandoned(&TABLE, node, stuck_before).await
    }

    /// Ready archive snapshots of `node`'s engine that no session holds as its archive any
    /// more (restored and archived again, released, or made by an archive that crashed
    /// before its row was written): of an earlier incarnation of `node`, or made before
    /// `settled_before` (ms; a live archive writes its row right after the commit).
    pub async fn stale_archives(
        &self,
        node: &str,
        settled_before: u64,
    ) -> Result<Vec<SnapshotRecord>, WharfError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM wharf_snapshots s
             WHERE s.state = 'ready' AND s.archive_of IS NOT NULL AND s.node = $1
               AND (s.boot <> $2 OR s.created_at < $3)
               AND NOT EXISTS (SELECT 1 FROM wharf_sessions w
                               WHERE w.id = s.archive_of AND w.archive = s.id)"
        );
        self.fetch_all(self.of_node_before(&sql, node, settled_before), record)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{fresh_store, sorted};

    fn snapshot(id: &str, tenant: &str) -> SnapshotRecord {
        SnapshotRecord {
            id: id.into(),
            tenant: tenant.into(),
            backend: "b".into(),
            name: id.into(),
            image: format!("wharf-snapshot:{id}"),
            origin_session: "s".into(),
            bytes: 0,
            state: SnapshotState::Making,
            created_at_ms: 1_000,
            archive_of: None,
        }
    }

    #[tokio::test]
    async fn a_tenants_count_holds_and_a_dead_incarnations_makings_are_abandoned()
    -> anyhow::Result<()> {
        let (_dir, path, store) = fresh_store().await?;
        assert!(store.insert_snapshot(&snapshot("a", "t1"), "n1", 2).await?);
        assert!(store.insert_snapshot(&snapshot("b", "t1"), "n1", 2).await?);
        assert!(
            !store.insert_snapshot(&snapshot("c", "t1"), "n1", 2).await?,
            "a third is past the tenant's count"
        );
        assert!(store.insert_snapshot(&snapshot("d", "t2"), "n1", 2).await?);
        assert!(store.mark_snapshot_ready("a", 4096).await?);
        assert_eq!(store.list_snapshots(Some("t1")).await?.len(), 2);
        assert_eq!(store.list_snapshots(None).await?.len(), 3);
        assert_eq!(store.get_snapshot("a").await?.map(|s| s.bytes), Some(4096));
        assert_eq!(
            store.snapshot_usage(None).await?,
            vec![("t1".to_string(), 1, 4096)],
            "only ready snapshots count"
        );
        assert!(store.snapshot_usage(Some("t2")).await?.is_empty());

        // Nothing is abandoned by the live incarnation; a restart finds its makings.
        assert!(store.abandoned_snapshots("n1", 0).await?.is_empty());
        let restarted = StateStore::open_sqlite(&path).await?;
        let found = restarted.abandoned_snapshots("n1", 0).await?;
        assert_eq!(sorted(found.iter().map(|s| s.id.as_str())), ["b", "d"]);
        restarted.delete_snapshot("b").await?;
        assert!(restarted.get_snapshot("b").await?.is_none());
        Ok(())
    }
}

//! Volume rows: one per named volume, `making` while the engine creates it (written before,
//! so a crash leaves a row the sweep finishes: its engine volume, if any, removed), then
//! `ready`, with the bytes the host last measured. A tenant's count and the uniqueness of
//! its names are checked in the insert itself, so they hold across nodes.

use super::made_rows::MadeTable;
use super::{Columns, StateStore, unavailable};
use crate::bounded::to_column;
use crate::error_code::WharfError;
use crate::volume_record::{VolumeRecord, VolumeState};
use sqlx::any::AnyRow;

const COLUMNS: &str =
    "id, tenant, name, shared, engine_volume, bytes, measured_at, state, created_at";

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeInsert {
    /// The row is written.
    Inserted,
    /// The tenant has a volume of that name already.
    NameTaken,
    /// The tenant has its quota of volumes already.
    AtQuota,
}

/// The table, as the shared reads of `made_rows` see it.
const TABLE: MadeTable<VolumeRecord> = MadeTable {
    name: "wharf_volumes",
    columns: COLUMNS,
    record,
};

fn record(row: &AnyRow) -> Result<VolumeRecord, WharfError> {
    let c = Columns::of(row, "volume");
    Ok(VolumeRecord {
        id: c.get("id")?,
        tenant: c.get("tenant")?,
        name: c.get("name")?,
        shared: c.number("shared")? != 0,
        engine_volume: c.get("engine_volume")?,
        bytes: c.number("bytes")?,
        measured_at_ms: c.number("measured_at")?,
        state: c.state(VolumeState::parse)?,
        created_at_ms: c.number("created_at")?,
    })
}

impl StateStore {
    /// Records a volume about to be made (`making`, held by this node's incarnation),
    /// unless its tenant already has `max_count` or one of its name.
    #[tracing::instrument(name = "store.insert_volume", level = "debug", skip_all)]
    pub async fn insert_volume(
        &self,
        v: &VolumeRecord,
        node: &str,
        max_count: u64,
    ) -> Result<VolumeInsert, WharfError> {
        let done = sqlx::query(
            "INSERT INTO wharf_volumes (id, tenant, name, shared, engine_volume, bytes, measured_at, state, node, boot, created_at)
             SELECT $1, $2, $3, $4, $5, 0, 0, 'making', $6, $7, $8
             WHERE (SELECT COUNT(*) FROM wharf_volumes WHERE tenant = $9) < $10",
        )
        .bind(&v.id)
        .bind(&v.tenant)
        .bind(&v.name)
        .bind(i64::from(v.shared))
        .bind(&v.engine_volume)
        .bind(node)
        .bind(self.boot())
        .bind(to_column(v.created_at_ms))
        .bind(&v.tenant)
        .bind(to_column(max_count))
        .execute(self.pool())
        .await;
        match done {
            Ok(done) if done.rows_affected() == 1 => Ok(VolumeInsert::Inserted),
            // Nothing written: a name taken answers before the count (one more read, on
            // refusals only).
            Ok(_) if self.volume_named(&v.tenant, &v.name).await?.is_some() => {
                Ok(VolumeInsert::NameTaken)
            }
            Ok(_) => Ok(VolumeInsert::AtQuota),
            // The name's uniqueness: the table's `UNIQUE (tenant, name)`.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(VolumeInsert::NameTaken),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// `making` → `ready`.
    pub async fn mark_volume_ready(&self, id: &str) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_volumes SET state = 'ready' WHERE id = $1 AND state = 'making'",
            )
            .bind(id),
        )
        .await
    }

    /// Records what a volume's files held at `at_ms`.
    pub async fn set_volume_bytes(
        &self,
        id: &str,
        bytes: u64,
        at_ms: u64,
    ) -> Result<(), WharfError> {
        self.run(
            sqlx::query("UPDATE wharf_volumes SET bytes = $1, measured_at = $2 WHERE id = $3")
                .bind(to_column(bytes))
                .bind(to_column(at_ms))
                .bind(id),
        )
        .await
    }

    /// One volume.
    pub async fn get_volume(&self, id: &str) -> Result<Option<VolumeRecord>, WharfError> {
        self.made_get(&TABLE, id).await
    }

    /// `tenant`'s volume called `name`.
    pub async fn volume_named(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<VolumeRecord>, WharfError> {
        let sql = format!("SELECT {COLUMNS} FROM wharf_volumes WHERE tenant = $1 AND name = $2");
        self.fetch_optional(sqlx::query(&sql).bind(tenant).bind(name), record)
            .await
    }

    /// The volumes of `tenant` (every tenant's with `None`), oldest first.
    pub async fn list_volumes(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<VolumeRecord>, WharfError> {
        self.made_list(&TABLE, tenant).await
    }

    /// Forgets a volume.
    pub async fn delete_volume(&self, id: &str) -> Result<(), WharfError> {
        self.made_delete(&TABLE, id).await
    }

    /// `making` rows nobody finishes: made by an earlier incarnation of `node`, or started
    /// before `stuck_before` (ms).
    pub async fn abandoned_volumes(
        &self,
        node: &str,
        stuck_before: u64,
    ) -> Result<Vec<VolumeRecord>, WharfError> {
        self.made_abandoned(&TABLE, node, stuck_before).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{fresh_store, sorted};

    fn volume(id: &str, tenant: &str, name: &str) -> VolumeRecord {
        VolumeRecord {
            id: id.into(),
            tenant: tenant.into(),
            name: name.into(),
            shared: false,
            engine_volume: format!("wharf-vol-{id}"),
            bytes: 0,
            measured_at_ms: 0,
            state: VolumeState::Making,
            created_at_ms: 1_000,
        }
    }

    #[tokio::test]
    async fn names_are_per_tenant_counts_hold_and_dead_makings_are_abandoned() -> anyhow::Result<()>
    {
        let (_dir, path, store) = fresh_store().await?;
        let inserts = [
            ("a", "t1", "data", VolumeInsert::Inserted),
            ("b", "t1", "data", VolumeInsert::NameTaken),
            // Another tenant's name is its own.
            ("c", "t2", "data", VolumeInsert::Inserted),
            ("d", "t1", "cache", VolumeInsert::Inserted),
            ("e", "t1", "more", VolumeInsert::AtQuota),
        ];
        for (id, tenant, name, outcome) in inserts {
            let inserted = store
                .insert_volume(&volume(id, tenant, name), "n1", 2)
                .await?;
            assert_eq!(inserted, outcome, "{id}");
        }
        assert!(store.mark_volume_ready("a").await?);
        store.set_volume_bytes("a", 4096, 5_000).await?;
        let a = store
            .volume_named("t1", "data")
            .await?
            .map(|v| (v.id, v.bytes, v.state));
        assert_eq!(a, Some(("a".into(), 4096, VolumeState::Ready)));
        assert!(store.volume_named("t2", "cache").await?.is_none());
        assert_eq!(store.list_volumes(Some("t1")).await?.len(), 2);
        assert_eq!(store.list_volumes(None).await?.len(), 3);

        assert!(store.abandoned_volumes("n1", 0).await?.is_empty());
        let restarted = StateStore::open_sqlite(&path).await?;
        let found = restarted.abandoned_volumes("n1", 0).await?;
        assert_eq!(sorted(found.iter().map(|v| v.id.as_str())), ["c", "d"]);
        restarted.delete_volume("c").await?;
        assert!(restarted.get_volume("c").await?.is_none());
        Ok(())
    }
}

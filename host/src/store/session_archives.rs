//! The archive transitions of a session row (`on_idle = "snapshot"`): `ready` →
//! `archived` once its sandbox's snapshot is made, and `archived` → `ready` with the data of
//! the sandbox restored from it. Each is a compare-and-set on the generation the caller
//! read, so two nodes never both archive or both restore a session. An archived row keeps
//! when it was archived in `last_activity`, when it ends in `paused_until`, and its
//! snapshot in `archive`.

use super::StateStore;
use crate::bounded::to_column;
use crate::error_code::WharfError;
use serde_json::Value;

impl StateStore {
    /// `ready` → `archived` at `now` into snapshot `archive`, ending at `until` unless
    /// restored, while fewer than `cap.backend` sessions of its backend and `cap.tenant`
    /// of its tenant are archived (counted in the update itself, so across nodes); the new
    /// generation, or `None` when the row changed since `generation` was read or a cap is
    /// reached.
    #[tracing::instrument(name = "store.mark_archived", level = "debug", skip_all)]
    pub async fn mark_archived(
        &self,
        record: &crate::session_record::SessionRecord,
        archive: &str,
        now: u64,
        until: Option<u64>,
        cap: super::PauseCap,
    ) -> Result<Option<u64>, WharfError> {
        let generation = record.generation;
        let changed = self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET state = 'archived', archive = $1, last_activity = $2,
                    paused_until = $3, generation = generation + 1
             WHERE id = $4 AND state = 'ready' AND generation = $5
               AND (SELECT COUNT(*) FROM wharf_sessions WHERE backend = $6 AND state = 'archived') < $7
               AND (SELECT COUNT(*) FROM wharf_sessions WHERE tenant = $8 AND state = 'archived') < $9",
        )
        .bind(archive)
        .bind(to_column(now))
        .bind(until.map(to_column))
        .bind(&record.id)
        .bind(to_column(generation))
        .bind(&record.backend)
        .bind(to_column(cap.backend.unwrap_or(u64::MAX)))
        .bind(&record.tenant)
        .bind(to_column(cap.tenant.unwrap_or(u64::MAX)))).await?;
        Ok(changed.then_some(generation + 1))
    }

    /// `archived` → `ready` at `now` with the restored sandbox's `data`, its running
    /// lifetime ending at `max_expires_at`; the new generation, or `None` when the row
    /// changed since `generation` was read. The row keeps naming its archive: the new
    /// sandbox runs from that image.
    #[tracing::instrument(name = "store.mark_restored", level = "debug", skip_all)]
    pub async fn mark_restored(
        &self,
        id: &str,
        generation: u64,
        data: &Value,
        now: u64,
        max_expires_at: Option<u64>,
    ) -> Result<Option<u64>, WharfError> {
        let changed = self
            .changed_one(
                sqlx::query(
                    "UPDATE wharf_sessions SET state = 'ready', data = $1, last_activity = $2,
                    paused_until = NULL, max_expires_at = $3, generation = generation + 1
             WHERE id = $4 AND state = 'archived' AND generation = $5",
                )
                .bind(data.to_string())
                .bind(to_column(now))
                .bind(max_expires_at.map(to_column))
                .bind(id)
                .bind(to_column(generation)),
            )
            .await?;
        Ok(changed.then_some(generation + 1))
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot_record::{SnapshotRecord, SnapshotState};
    use crate::store::session_leases::tests::store_with_a_ready_row;
    use crate::store::{PauseCap, SessionState, StateStore};
    use serde_json::json;

    fn archive_of(id: &str, session: &str) -> SnapshotRecord {
        SnapshotRecord {
            id: id.into(),
            tenant: "t".into(),
            backend: "b".into(),
            name: id.into(),
            image: format!("wharf-snapshot:{id}"),
            origin_session: session.into(),
            bytes: 0,
            state: SnapshotState::Making,
            created_at_ms: 1_000,
            archive_of: Some(session.into()),
        }
    }

    #[tokio::test]
    async fn archives_are_compare_and_sets_and_an_archive_no_row_holds_is_stale()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, ready) = store_with_a_ready_row(dir.path()).await?;
        let path = dir.path().join("s.db");
        let g = ready.generation;
        let at = |generation: u64| {
            let mut record = ready.clone();
            record.generation = generation;
            record
        };
        for snap in ["a1", "a2"] {
            assert!(
                store
                    .insert_snapshot(&archive_of(snap, "s"), "n1", 9)
                    .await?
            );
            assert!(store.mark_snapshot_ready(snap, 10).await?);
        }
        let free = PauseCap::default();

        assert_eq!(
            store
                .mark_archived(&at(g + 3), "a1", 2_000, Some(9_000), free)
                .await?,
            None
        );
        assert_eq!(
            store.mark_restored("s", g, &json!({}), 2_000, None).await?,
            None,
            "not archived"
        );
        let none = PauseCap {
            backend: Some(0),
            tenant: None,
        };
        assert_eq!(
            store
                .mark_archived(&at(g), "a1", 2_000, Some(9_000), none)
                .await?,
            None,
            "past the backend's cap"
        );
        let archived_g = store
            .mark_archived(&at(g), "a1", 2_000, Some(9_000), free)
            .await?;
        assert_eq!(archived_g, Some(g + 1));
        let archived = store.get_session("s").await?.expect("row");
        assert_eq!(archived.state, SessionState::Archived);
        assert_eq!(archived.archive.as_deref(), Some("a1"));
        assert_eq!(archived.expires_at_ms(), Some(9_000));

        // Only the archive no row holds is stale, and only once settled.
        let stale = |before| {
            let store = store.clone();
            async move {
                Ok::<_, anyhow::Error>(
                    store
                        .stale_archives("n1", before)
                        .await?
                        .into_iter()
                        .map(|s| s.id)
                        .collect::<Vec<_>>(),
                )
            }
        };
        assert!(
            stale(0).await?.is_empty(),
            "made by the live incarnation, not settled"
        );
        assert_eq!(stale(5_000).await?, vec!["a2".to_string()]);
        assert!(
            store.stale_archives("n2", 5_000).await?.is_empty(),
            "another node's engine"
        );

        let ready_g = store
            .mark_restored("s", g + 1, &json!({"sandbox": "new"}), 3_000, Some(8_000))
            .await?;
        assert_eq!(ready_g, Some(g + 2));
        let ready = store.get_session("s").await?.expect("row");
        assert_eq!(ready.state, SessionState::Ready);
        assert_eq!(ready.data, json!({"sandbox": "new"}));
        assert_eq!(
            ready.archive.as_deref(),
            Some("a1"),
            "its sandbox runs from it"
        );
        assert_eq!(ready.paused_until_ms, None);

        // A restart: the dead incarnation's archive no row holds is stale at once.
        let restarted = StateStore::open_sqlite(&path).await?;
        assert_eq!(
            restarted
                .stale_archives("n1", 0)
                .await?
                .into_iter()
                .map(|s| s.id)
                .collect::<Vec<_>>(),
            vec!["a2".to_string()]
        );
        restarted.delete_session("s").await?;
        assert_eq!(
            restarted.stale_archives("n1", 0).await?.len(),
            2,
            "released: both"
        );
        Ok(())
    }
}

//! The pause transitions of a session row: `ready` ⇄ `paused`, each a compare-and-set on
//! the generation the caller read, so two nodes never both pause or both resume a session.
//! A paused row keeps when it paused in `last_activity` and when it ends in
//! `paused_until`.

use super::StateStore;
use crate::bounded::to_column;
use crate::error_code::WharfError;

/// The most sessions that may be paused (or archived) at once when one more is: of the
/// session's backend, and of its tenant (`None`: no cap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseCap {
    /// Of the backend (`[backends.X.sessions] max_paused`).
    pub backend: Option<u64>,
    /// Of the tenant (`[quotas] paused_sessions`).
    pub tenant: Option<u64>,
}

impl StateStore {
    /// `ready` → `paused` at `now`, ending at `paused_until` unless resumed, while fewer
    /// than `cap.backend` sessions of its backend and `cap.tenant` of its tenant are paused
    /// (counted in the update itself, so across nodes); the new generation, or `None` when
    /// the row changed since `generation` was read or a cap is reached.
    #[tracing::instrument(name = "store.mark_paused", level = "debug", skip_all)]
    pub async fn mark_paused(
        &self,
        record: &crate::session_record::SessionRecord,
        now: u64,
        paused_until: Option<u64>,
        cap: PauseCap,
    ) -> Result<Option<u64>, WharfError> {
        let changed = self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET state = 'paused', last_activity = $1, paused_until = $2,
                    generation = generation + 1
             WHERE id = $3 AND state = 'ready' AND generation = $4
               AND (SELECT COUNT(*) FROM wharf_sessions WHERE backend = $5 AND state = 'paused') < $6
               AND (SELECT COUNT(*) FROM wharf_sessions WHERE tenant = $7 AND state = 'paused') < $8",
        )
        .bind(to_column(now))
        .bind(paused_until.map(to_column))
        .bind(&record.id)
        .bind(to_column(record.generation))
        .bind(&record.backend)
        .bind(to_column(cap.backend.unwrap_or(u64::MAX)))
        .bind(&record.tenant)
        .bind(to_column(cap.tenant.unwrap_or(u64::MAX)))).await?;
        Ok(changed.then_some(record.generation + 1))
    }

    /// `paused` → `ready` at `now`, its running lifetime ending at `max_expires_at`; the
    /// new generation, or `None` when the row changed since `generation` was read.
    #[tracing::instrument(name = "store.mark_resumed", level = "debug", skip_all)]
    pub async fn mark_resumed(
        &self,
        id: &str,
        generation: u64,
        now: u64,
        max_expires_at: Option<u64>,
    ) -> Result<Option<u64>, WharfError> {
        let changed = self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET state = 'ready', last_activity = $1, paused_until = NULL,
                    max_expires_at = $2, generation = generation + 1
             WHERE id = $3 AND state = 'paused' AND generation = $4",
        )
        .bind(to_column(now))
        .bind(max_expires_at.map(to_column))
        .bind(id)
        .bind(to_column(generation))).await?;
        Ok(changed.then_some(generation + 1))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::session_leases::tests::{creating, store_with_a_ready_row};
    use crate::store::{PauseCap, SessionState};
    use serde_json::Value;

    #[tokio::test]
    async fn pauses_are_compare_and_sets_and_a_paused_row_can_be_released() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, ready) = store_with_a_ready_row(dir.path()).await?;
        let g = ready.generation;
        let at = |generation: u64| {
            let mut record = ready.clone();
            record.generation = generation;
            record
        };
        let free = PauseCap::default();

        assert_eq!(
            store
                .mark_paused(&at(g + 5), 2_000, Some(9_000), free)
                .await?,
            None
        );
        assert_eq!(
            store.mark_resumed("s", g, 2_000, None).await?,
            None,
            "not paused"
        );
        let paused_g = store.mark_paused(&at(g), 2_000, Some(9_000), free).await?;
        assert_eq!(paused_g, Some(g + 1));
        let paused = store.get_session("s").await?.expect("row");
        assert_eq!(paused.state, SessionState::Paused);
        assert_eq!(paused.paused_until_ms, Some(9_000));
        assert_eq!(paused.last_activity_ms, 2_000);
        assert_eq!(
            paused.expires_at_ms(),
            Some(9_000),
            "the paused TTL, not the idle one"
        );
        assert_eq!(
            store.mark_paused(&at(g + 1), 2_500, None, free).await?,
            None,
            "a paused row is not paused twice"
        );

        let resumed = store.mark_resumed("s", g + 1, 5_000, Some(13_000)).await?;
        assert_eq!(resumed, Some(g + 2));
        let ready = store.get_session("s").await?.expect("row");
        assert_eq!(ready.state, SessionState::Ready);
        assert_eq!(ready.paused_until_ms, None);
        assert_eq!(ready.max_expires_at_ms, Some(13_000));

        // A cap holds: with one session of its backend paused, a cap of one refuses more.
        assert!(
            store
                .insert_creating(&creating("t", "n1", u64::MAX >> 12))
                .await?
        );
        assert!(store.mark_ready("t", "n1", &Value::Null, 1_000).await?);
        let other = store.get_session("t").await?.expect("row");
        store.mark_paused(&at(g + 2), 6_000, None, free).await?;
        let one = PauseCap {
            backend: Some(1),
            tenant: None,
        };
        assert_eq!(store.mark_paused(&other, 6_000, None, one).await?, None);
        let one_each = PauseCap {
            backend: None,
            tenant: Some(1),
        };
        assert_eq!(
            store.mark_paused(&other, 6_000, None, one_each).await?,
            None
        );
        let two = PauseCap {
            backend: Some(2),
            tenant: Some(2),
        };
        assert!(store.mark_paused(&other, 6_000, None, two).await?.is_some());
        assert!(
            store.begin_release("s", "n1", 99_000, Some(6_000)).await?,
            "a paused row is released like a ready one"
        );
        Ok(())
    }
}

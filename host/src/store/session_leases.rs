//! The lease-row state machine of session rows: `creating` (a node holds a lease while it
//! runs `initialize` outside any transaction) → `ready` (compare-and-set by that node) →
//! `releasing` (cleanup running) → deleted. A lease is held by a node and its boot id (this
//! store's incarnation); an expired `creating` or `releasing` lease, or one held by an
//! earlier incarnation of the same node, is taken over by whoever comes next.

use super::SessionState;
use super::session_rows::{COLUMNS, record};
use super::{SessionRecord, StateStore};
use crate::error_code::WharfError;
use serde_json::Value;

impl StateStore {
    /// `creating` → `ready` with the initialized data, only by the lease holder (this node
    /// in this incarnation).
    #[tracing::instrument(name = "store.mark_ready", level = "debug", skip_all)]
    pub async fn mark_ready(
        &self,
        id: &str,
        node: &str,
        data: &Value,
        now: i64,
    ) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET state = 'ready', data = $1, last_activity = $2, lease_until = 0,
                    generation = generation + 1
             WHERE id = $3 AND state = 'creating' AND node = $4 AND boot = $5",
        )
        .bind(data.to_string())
        .bind(now)
        .bind(id)
        .bind(node)
        .bind(self.boot())).await
    }

    /// Takes over a `creating` or `releasing` row whose lease ran out or is held by an
    /// earlier incarnation of `node`; true when taken.
    #[tracing::instrument(name = "store.take_over", level = "debug", skip_all)]
    pub async fn take_over(
        &self,
        id: &str,
        state: SessionState,
        node: &str,
        lease_until: i64,
        now: i64,
    ) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET node = $1, lease_until = $2, boot = $6, generation = generation + 1
             WHERE id = $3 AND state = $4 AND (lease_until < $5 OR (node = $1 AND boot <> $6))",
        )
        .bind(node)
        .bind(lease_until)
        .bind(id)
        .bind(state.as_str())
        .bind(now)
        .bind(self.boot())).await
    }

    /// Extends the lease of a `creating` or `releasing` row this node holds in this
    /// incarnation; false when it holds it no longer.
    #[tracing::instrument(name = "store.renew_lease", level = "debug", skip_all)]
    pub async fn renew_lease(
        &self,
        id: &str,
        node: &str,
        lease_until: i64,
    ) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_sessions SET lease_until = $1
             WHERE id = $2 AND node = $3 AND boot = $4 AND state IN ('creating', 'releasing')",
            )
            .bind(lease_until)
            .bind(id)
            .bind(node)
            .bind(self.boot()),
        )
        .await
    }

    /// `creating` and `releasing` rows nobody finishes: their lease ran out, or an earlier
    /// incarnation of `node` holds them (it died: a process has one incarnation).
    #[tracing::instrument(name = "store.abandoned_sessions", level = "debug", skip_all)]
    pub async fn abandoned_sessions(
        &self,
        node: &str,
        now: i64,
    ) -> Result<Vec<SessionRecord>, WharfError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM wharf_sessions
             WHERE state IN ('creating', 'releasing')
               AND (lease_until < $1 OR (node = $2 AND boot <> $3))
             ORDER BY created_at, id"
        );
        let statement = sqlx::query(&sql).bind(now).bind(node).bind(self.boot());
        self.fetch_all(statement, record).await
    }

    /// `ready` (or `paused`) → `releasing` under a lease. With `idle_before`, only if nothing touched the
    /// session since then (an idle expiry must not release a session another node just used).
    #[tracing::instrument(name = "store.begin_release", level = "debug", skip_all)]
    pub async fn begin_release(
        &self,
        id: &str,
        node: &str,
        lease_until: i64,
        idle_before: Option<i64>,
    ) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET state = 'releasing', node = $1, lease_until = $2, boot = $5,
                    generation = generation + 1
             WHERE id = $3 AND state IN ('ready', 'paused', 'archived') AND ($4 < 0 OR last_activity <= $4)",
        )
        .bind(node)
        .bind(lease_until)
        .bind(id)
        .bind(idle_before.unwrap_or(-1))
        .bind(self.boot())).await
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::store::StateStore;

    /// A store in `dir` with one `ready` row, `s` of node `n1`, as it was read back.
    pub(in crate::store) async fn store_with_a_ready_row(
        dir: &std::path::Path,
    ) -> anyhow::Result<(StateStore, SessionRecord)> {
        let store = StateStore::open_sqlite(&dir.join("s.db")).await?;
        assert!(
            store
                .insert_creating(&creating("s", "n1", u64::MAX >> 12))
                .await?
        );
        assert!(
            store
                .mark_ready("s", "n1", &serde_json::Value::Null, 1_000)
                .await?
        );
        let ready = store.get_session("s").await?.expect("row");
        Ok((store, ready))
    }

    /// A `creating` row of tenant `t`, backend `b`, leased by `node` until `lease_until_ms`.
    pub(in crate::store) fn creating(id: &str, node: &str, lease_until_ms: u64) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            tenant: "t".into(),
            backend: "b".into(),
            key: id.into(),
            state: SessionState::Creating,
            data: Value::Null,
            owner: None,
            holder: None,
            holder_until_ms: 0,
            plugin_version: String::new(),
            node: node.into(),
            lease_until_ms,
            created_at_ms: 0,
            last_activity_ms: 0,
            idle_ttl_seconds: 0,
            max_expires_at_ms: None,
            generation: 0,
            paused_until_ms: None,
            archive: None,
        }
    }

    #[tokio::test]
    async fn a_lease_is_abandoned_when_it_runs_out_or_an_earlier_incarnation_holds_it()
    -> anyhow::Result<()> {
        let (_dir, path, before_crash) = crate::store::tests::fresh_store().await?;
        let now = 1_000_000;
        assert!(
            before_crash
                .insert_creating(&creating("live", "n1", now + 60_000))
                .await?
        );
        assert!(
            before_crash
                .insert_creating(&creating("other", "n2", now + 60_000))
                .await?
        );
        assert!(
            before_crash
                .insert_creating(&creating("expired", "n2", now - 1))
                .await?
        );
        let ids = |rows: Vec<SessionRecord>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();

        // The same incarnation: its own live lease is not abandoned.
        let mine = ids(before_crash.abandoned_sessions("n1", now as i64).await?);
        assert_eq!(mine, vec!["expired".to_string()]);
        assert!(
            before_crash
                .renew_lease("live", "n1", now as i64 + 90_000)
                .await?
        );

        // The restarted node: the earlier incarnation's lease is dead, another node's
        // live one is not.
        let restarted = StateStore::open_sqlite(&path).await?;
        assert_ne!(restarted.boot(), before_crash.boot());
        let mut found = ids(restarted.abandoned_sessions("n1", now as i64).await?);
        found.sort();
        assert_eq!(found, vec!["expired".to_string(), "live".to_string()]);
        assert!(
            !restarted
                .take_over(
                    "other",
                    SessionState::Creating,
                    "n1",
                    now as i64,
                    now as i64
                )
                .await?
        );
        assert!(
            restarted
                .take_over(
                    "live",
                    SessionState::Creating,
                    "n1",
                    now as i64 + 60_000,
                    now as i64
                )
                .await?
        );
        // The dead incarnation can neither renew nor finish what was taken from it.
        assert!(
            !before_crash
                .renew_lease("live", "n1", now as i64 + 90_000)
                .await?
        );
        assert!(
            !before_crash
                .mark_ready("live", "n1", &Value::Null, now as i64)
                .await?
        );
        assert!(
            restarted
                .mark_ready("live", "n1", &Value::Null, now as i64)
                .await?
        );
        Ok(())
    }
}

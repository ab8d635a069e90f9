//! Warm sandboxes (ARCHITECTURE.md, "Warm sandboxes"): one row per sandbox a node's warm
//! pool made, `warming` (create in flight) → `idle` (ready to hand out) → `taken` (its
//! session's, by id). A take is one compare-and-set, so a sandbox is handed out once even
//! with several nodes on one store. A row whose node incarnation is gone, or whose taker
//! session is gone, is stale: the sweeper destroys its sandbox and deletes it. Containers
//! labelled with a row's id are not orphans while the row exists.

use super::{StateStore, column};
use crate::error_code::WharfError;

/// A warm-sandbox row as the sweeper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmRow {
    /// The pool's id for it (the session id its provider calls carry).
    pub id: String,
    /// The backend whose pool made it.
    pub backend: String,
    /// The provider's handle, once created.
    pub handle: Option<String>,
    /// The session that took it, if one did.
    pub taken_by: Option<String>,
}

impl StateStore {
    /// Records a sandbox this node's pool is about to create.
    #[tracing::instrument(name = "store.insert_warming", level = "debug", skip_all)]
    pub async fn insert_warming(
        &self,
        id: &str,
        backend: &str,
        node: &str,
        now_ms: i64,
    ) -> Result<(), WharfError> {
        self.run(sqlx::query(
            "INSERT INTO wharf_warm_sandboxes (id, backend, handle, state, node, boot, taken_by, created_at)
             VALUES ($1, $2, NULL, 'warming', $3, $4, NULL, $5)",
        )
        .bind(id)
        .bind(backend)
        .bind(node)
        .bind(self.boot())
        .bind(now_ms)).await
    }

    /// The create finished: the sandbox is `idle` with `handle`. False when the row is gone
    /// (the sweeper took it): the caller destroys what it made.
    #[tracing::instrument(name = "store.warm_ready", level = "debug", skip_all)]
    pub async fn warm_ready(&self, id: &str, handle: &str) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_warm_sandboxes SET handle = $1, state = 'idle'
             WHERE id = $2 AND state = 'warming'",
            )
            .bind(handle)
            .bind(id),
        )
        .await
    }

    /// Hands idle sandbox `id` to `session`; true for exactly one caller.
    #[tracing::instrument(name = "store.claim_warm", level = "debug", skip_all)]
    pub async fn claim_warm(&self, id: &str, session: &str) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_warm_sandboxes SET state = 'taken', taken_by = $1
             WHERE id = $2 AND state = 'idle'",
            )
            .bind(session)
            .bind(id),
        )
        .await
    }

    /// Forgets a sandbox (destroyed, or never made).
    #[tracing::instrument(name = "store.delete_warm", level = "debug", skip_all)]
    pub async fn delete_warm(&self, id: &str) -> Result<(), WharfError> {
        self.run(sqlx::query("DELETE FROM wharf_warm_sandboxes WHERE id = $1").bind(id))
            .await
    }

    /// Whether `id` is a warm sandbox's (so a container labelled with it is not an orphan).
    #[tracing::instrument(name = "store.warm_exists", level = "debug", skip_all)]
    pub async fn warm_exists(&self, id: &str) -> Result<bool, WharfError> {
        let statement = sqlx::query("SELECT 1 AS found FROM wharf_warm_sandboxes WHERE id = $1");
        let found = self.fetch_optional(statement.bind(id), |_| Ok(())).await?;
        Ok(found.is_some())
    }

    /// Rows nobody will finish: not taken and made by a node incarnation that is gone (not
    /// this one, and no live heartbeat in its boot id), or taken by a session that is gone.
    #[tracing::instrument(name = "store.stale_warm", level = "debug", skip_all)]
    pub async fn stale_warm(&self, node: &str, now_ms: i64) -> Result<Vec<WarmRow>, WharfError> {
        let statement = sqlx::query(
            "SELECT w.id, w.backend, w.handle, w.taken_by FROM wharf_warm_sandboxes w
             WHERE (w.state <> 'taken'
                    AND NOT (w.node = $1 AND w.boot = $2)
                    AND NOT EXISTS (SELECT 1 FROM wharf_nodes n
                                    WHERE n.id = w.node AND n.boot = w.boot
                                      AND n.lease_until >= $3))
                OR (w.state = 'taken'
                    AND NOT EXISTS (SELECT 1 FROM wharf_sessions s WHERE s.id = w.taken_by))",
        )
        .bind(node)
        .bind(self.boot())
        .bind(now_ms);
        self.fetch_all(statement, |row| {
            Ok(WarmRow {
                id: column(row, "id")?,
                backend: column(row, "backend")?,
                handle: column(row, "handle")?,
                taken_by: column(row, "taken_by")?,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::StateStore;

    #[tokio::test]
    async fn a_sandbox_is_claimed_once_and_a_dead_incarnations_rows_are_stale() -> anyhow::Result<()>
    {
        let (_dir, path, before) = crate::store::tests::fresh_store().await?;
        before.insert_warming("p1", "docker", "n1", 0).await?;
        assert!(!before.claim_warm("p1", "s1").await?, "warming is not idle");
        assert!(before.warm_ready("p1", "h1").await?);
        assert!(before.claim_warm("p1", "s1").await?);
        assert!(!before.claim_warm("p1", "s2").await?, "taken once");
        before.insert_warming("p2", "docker", "n1", 0).await?;
        assert!(before.warm_ready("p2", "h2").await?);
        assert!(
            before
                .stale_warm("n1", 10)
                .await?
                .iter()
                .all(|r| r.id != "p2")
        );
        // p1's taker session has no row: stale; p2 is this live incarnation's.
        let stale = before.stale_warm("n1", 10).await?;
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].taken_by.as_deref(), Some("s1"));
        let restarted = StateStore::open_sqlite(&path).await?;
        restarted.heartbeat("n1", 1_000, 10).await?;
        let stale = restarted.stale_warm("n1", 10).await?;
        assert!(
            stale
                .iter()
                .any(|r| r.id == "p2" && r.handle.as_deref() == Some("h2"))
        );
        restarted.delete_warm("p2").await?;
        assert!(!restarted.warm_exists("p2").await?);
        Ok(())
    }
}

//! The orphan reaper: containers labelled with a session that no longer exists.

use super::{SessionManager, now_ms};
use crate::engines::{ContainerEngine, Owner};
use crate::error_code::WharfError;

impl SessionManager {
    /// Removes containers labelled by Wharf whose session has no record, or is archived
    /// (its sandbox made before the archive, or a crashed restore's), when the node that
    /// made them is this one or a node of this store whose lease ran out. A container whose
    /// session is still `creating` has a record, so it is never reaped. Returns the removed
    /// ids.
    pub async fn reap_orphans(
        &self,
        engine: Option<&dyn ContainerEngine>,
    ) -> Result<Vec<String>, WharfError> {
        let Some(engine) = engine else {
            return Ok(Vec::new());
        };
        let containers = engine.list_all().await.map_err(WharfError::from)?;
        let nodes = self.store.known_nodes().await?;
        let now = now_ms() as i64;
        let mut removed = Vec::new();
        for c in containers {
            let Some(session) = c.session.clone() else {
                continue;
            };
            let node = c
                .label(crate::engines::container_types::LABEL_NODE)
                .unwrap_or_default()
                .to_string();
            // Only this node's containers, or those of a node of this store whose lease ran
            // out: a node the store never heard of belongs to another deployment.
            let dead_node_of_ours = nodes
                .get(&node)
                .is_some_and(|lease_until| *lease_until < now);
            if node != self.node && !dead_node_of_ours {
                continue;
            }
            let store = &self.store;
            // A warm sandbox's containers carry its pool id until the sweeper ends its row.
            match store.get_session(&session).await? {
                Some(row) if !archived_sandbox_left(&row, c.created_at_ms, now as u64) => continue,
                Some(_) => {}
                None if store.warm_exists(&session).await? => continue,
                None => {}
            }
            let owner = Owner {
                backend: c.backend.clone(),
                session: Some(session.clone()),
            };
            match engine.remove(&owner, &c.id).await {
                Ok(()) => {
                    tracing::info!(container = %c.id, session = %session, "reaped an orphaned container");
                    removed.push(c.id);
                }
                Err(e) => tracing::warn!(container = %c.id, "reaping failed: {e}"),
            }
        }
        Ok(removed)
    }
}

/// Whether a container of session `row`, made at `created_at_ms`, is one an archived
/// session no longer has: its old sandbox (made before the archive), or a restore's that
/// never made the row `ready` within [`super::RESTORE_GRACE_MS`].
fn archived_sandbox_left(
    row: &crate::session_record::SessionRecord,
    created_at_ms: u64,
    now: u64,
) -> bool {
    // The engine's list gives whole seconds: a restore's sandbox made in the second of the
    // archive must not pass for the old one, which went idle for at least a second before
    // it (the shortest idle TTL).
    row.state == crate::store::SessionState::Archived
        && (created_at_ms.saturating_add(1000) <= row.last_activity_ms
            || now.saturating_sub(created_at_ms) > super::RESTORE_GRACE_MS)
}

#[cfg(test)]
mod tests {
    use super::archived_sandbox_left;
    use crate::store::SessionState;

    #[test]
    fn an_archived_sessions_old_sandbox_and_a_crashed_restores_are_left_overs() {
        let mut row = crate::session_record::SessionRecord {
            id: "s".into(),
            tenant: "t".into(),
            backend: "b".into(),
            key: "k".into(),
            state: SessionState::Ready,
            data: serde_json::Value::Null,
            owner: None,
            holder: None,
            holder_until_ms: 0,
            plugin_version: "1".into(),
            node: "n".into(),
            lease_until_ms: 0,
            created_at_ms: 1_000,
            last_activity_ms: 10_000,
            idle_ttl_seconds: 0,
            max_expires_at_ms: None,
            paused_until_ms: None,
            archive: None,
            generation: 1,
        };
        assert!(
            !archived_sandbox_left(&row, 5_000, 20_000),
            "a ready session's own"
        );
        row.state = SessionState::Archived;
        assert!(
            archived_sandbox_left(&row, 5_000, 20_000),
            "made before the archive"
        );
        assert!(
            !archived_sandbox_left(&row, 15_000, 20_000),
            "a restore in progress"
        );
        assert!(
            !archived_sandbox_left(&row, 9_500, 20_000),
            "a restore in the archive's second, its time cut to the second"
        );
        assert!(
            archived_sandbox_left(&row, 15_000, 15_001 + super::super::RESTORE_GRACE_MS),
            "a restore that never finished"
        );
    }
}

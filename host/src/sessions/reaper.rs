//! The orphan reaper: containers labelled with a session that no longer exists.

use super::{SessionManager, now_ms};
use crate::engines::{ContainerEngine, Owner};
use crate::error_code::WharfError;

impl SessionManager {
    /// Removes containers labelled by Wharf whose session has no record, when the node
    /// that made them is this one or a node of this store whose lease ran out. A container
    /// whose session is still `creating` has a record, so it is never reaped. Returns the
    /// removed ids.
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
            if store.get_session(&session).await?.is_some() || store.warm_exists(&session).await? {
                continue;
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

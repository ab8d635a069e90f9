//! Warm sandboxes nobody will finish (ARCHITECTURE.md, "Warm sandboxes"): made by a node
//! incarnation that is gone (SIGKILL, a lost node) and never taken, or taken by a session
//! whose row is gone. Each is destroyed through its backend's provider (`destroy` of the
//! recorded handle), every container labelled with its id is removed, and its row is
//! deleted. A row of a backend not loaded here is left to a node that has it.

use crate::clock::now_ms;
use crate::engines::{ContainerEngine, Owner};
use crate::error_code::WharfError;
use crate::runtime::guest_types::SessionView;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::{StateStore, WarmRow};
use serde_json::json;
use std::sync::Arc;

/// Finishes the stale warm rows of the backends `backend_of` knows; returns their ids.
pub async fn sweep(
    store: &StateStore,
    node: &str,
    backend_of: impl Fn(&str) -> Option<Arc<LoadedBackend>>,
    engine: Option<&dyn ContainerEngine>,
) -> Result<Vec<String>, WharfError> {
    let mut swept = Vec::new();
    for row in store.stale_warm(node, now_ms() as i64).await? {
        let Some(backend) = backend_of(&row.backend) else {
            continue;
        };
        match finish(store, &backend, &row, engine).await {
            Ok(()) => {
                tracing::info!(backend = %row.backend, sandbox = %row.id, taken_by = ?row.taken_by, "swept a stale warm sandbox");
                swept.push(row.id);
            }
            Err(e) => {
                tracing::warn!(sandbox = %row.id, "sweeping a warm sandbox failed: {}", e.message)
            }
        }
    }
    Ok(swept)
}

async fn finish(
    store: &StateStore,
    backend: &LoadedBackend,
    row: &WarmRow,
    engine: Option<&dyn ContainerEngine>,
) -> Result<(), WharfError> {
    if let Some(handle) = &row.handle {
        let view = SessionView {
            id: row.id.clone(),
            key: String::new(),
            data: json!({ "sandbox": handle, "warm": row.id }),
            created_at_ms: 0,
            expires_at_ms: None,
        };
        backend.behaviour().cleanup(&view).await?;
    }
    if let Some(engine) = engine {
        let owner = Owner::session(row.backend.clone(), row.id.clone());
        for container in engine.list_owned(&row.backend, Some(&row.id)).await? {
            engine.remove(&owner, &container.id).await?;
        }
    }
    store.delete_warm(&row.id).await
}

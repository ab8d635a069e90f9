//! The backend side of a session, the same for every backend (a provider's are the
//! sandbox toolset's `create` / `is-alive` / `destroy` behind the same face).

use super::SessionRecord;
use crate::error_code::WharfError;
use crate::runtime::backend::SessionStart;
use crate::runtime::guest_types::Discovery;
use crate::runtime::loaded_backend::LoadedBackend;
use serde_json::Value;

/// Creates the session's resources; returns its data.
pub async fn initialize(
    backend: &LoadedBackend,
    record: &SessionRecord,
    config: &Value,
    max_lifetime_seconds: u64,
    warm: bool,
) -> Result<Value, WharfError> {
    let start = SessionStart {
        id: record.id.clone(),
        key: record.key.clone(),
        owner: record.owner.clone(),
        config: config.clone(),
        max_lifetime_seconds,
        warm,
    };
    backend.behaviour().initialize(start).await
}

/// Whether a stored session's resources still exist.
pub async fn discover(
    backend: &LoadedBackend,
    record: &SessionRecord,
) -> Result<Discovery, WharfError> {
    backend.behaviour().discover(&record.view()).await
}

/// Releases the session's resources (must succeed when they are already gone).
pub async fn cleanup(backend: &LoadedBackend, record: &SessionRecord) -> Result<(), WharfError> {
    backend.behaviour().cleanup(&record.view()).await
}

//! The backend side of a session, the same for every backend (a provider's are the
//! sandbox toolset's `create` / `is-alive` / `destroy` behind the same face).

use super::SessionRecord;
use crate::error_code::WharfError;
use crate::runtime::backend::SessionStart;
use crate::runtime::guest_types::Discovery;
use crate::runtime::loaded_backend::LoadedBackend;
use serde_json::Value;

use crate::bounded::MAX_SESSION_DATA_BYTES;

/// The size of `data` when it is over [`MAX_SESSION_DATA_BYTES`].
fn oversized(data: &Value) -> Option<usize> {
    let len = serde_json::to_vec(data).map_or(usize::MAX, |bytes| bytes.len());
    (len > MAX_SESSION_DATA_BYTES).then_some(len)
}

fn too_large(backend: &LoadedBackend, len: usize) -> WharfError {
    WharfError::new(
        crate::error_code::Code::ExecutionError,
        format!(
            "backend `{}` returned {len} bytes of session data; a session keeps at most {MAX_SESSION_DATA_BYTES} (keep large state in kv or the sandbox)",
            backend.name
        ),
    )
}

/// Creates the session's resources; returns its data (at most
/// [`MAX_SESSION_DATA_BYTES`]: past it the resources are cleaned up and the create fails).
pub async fn initialize(
    backend: &LoadedBackend,
    record: &SessionRecord,
    config: &Value,
    max_lifetime_seconds: u64,
    warm: bool,
    sandbox: crate::runtime::backend::SandboxGrant,
) -> Result<Value, WharfError> {
    let start = SessionStart {
        tenant: std::sync::Arc::from(record.tenant.as_str()),
        id: record.id.clone(),
        key: record.key.clone(),
        owner: record.owner.clone(),
        config: config.clone(),
        max_lifetime_seconds,
        warm,
        sandbox,
    };
    let data = backend.behaviour().initialize(start).await?;
    if let Some(len) = oversized(&data) {
        // The cleanup gets the data as the backend made it: it names what to remove.
        let mut made = record.clone();
        made.data = data;
        let _ = cleanup(backend, &made).await;
        return Err(too_large(backend, len));
    }
    Ok(data)
}

/// Whether a stored session's resources still exist.
pub async fn discover(
    backend: &LoadedBackend,
    record: &SessionRecord,
) -> Result<Discovery, WharfError> {
    match backend.behaviour().discover(&record.view()).await? {
        Discovery::AliveWith(data) => match oversized(&data) {
            Some(len) => Err(too_large(backend, len)),
            None => Ok(Discovery::AliveWith(data)),
        },
        other => Ok(other),
    }
}

/// Releases the session's resources (must succeed when they are already gone).
pub async fn cleanup(backend: &LoadedBackend, record: &SessionRecord) -> Result<(), WharfError> {
    backend.behaviour().cleanup(&record.view()).await
}

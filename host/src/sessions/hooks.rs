//! The backend side of a session, the same for both worlds: a resource backend's
//! `initialize` / `discover` / `cleanup`, or a provider's `create` / `is-alive` / `destroy`.

use super::SessionRecord;
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::{Discovery, LoadedBackend};
use crate::sandbox_toolset::dispatch::sandbox_handle;
use crate::sandbox_toolset::session_spec::sandbox_spec;
use serde_json::{Value, json};

/// Creates the session's resources; returns its data.
pub async fn initialize(
    backend: &LoadedBackend,
    record: &SessionRecord,
    config: &Value,
    max_lifetime_seconds: u64,
) -> Result<Value, WharfError> {
    let timeout = backend.pool.settings().hook_timeout;
    if backend.is_resource_backend() {
        backend
            .initialize(&record.id, &record.key, config, timeout)
            .await
    } else {
        let spec = sandbox_spec(config, record.owner.clone(), max_lifetime_seconds)?;
        let handle = backend.create_sandbox(&record.id, spec, timeout).await?;
        Ok(json!({ "sandbox": handle }))
    }
}

/// Whether a stored session's resources still exist.
pub async fn discover(
    backend: &LoadedBackend,
    record: &SessionRecord,
) -> Result<Discovery, WharfError> {
    let timeout = backend.pool.settings().hook_timeout;
    if backend.is_resource_backend() {
        backend.discover(&record.view(), timeout).await
    } else {
        let Ok(handle) = sandbox_handle(record) else {
            return Ok(Discovery::Gone);
        };
        Ok(
            if backend.sandbox_alive(&record.id, handle, timeout).await? {
                Discovery::Alive
            } else {
                Discovery::Gone
            },
        )
    }
}

/// Releases the session's resources (must succeed when they are already gone).
pub async fn cleanup(backend: &LoadedBackend, record: &SessionRecord) -> Result<(), WharfError> {
    let timeout = backend.pool.settings().hook_timeout;
    if backend.is_resource_backend() {
        backend.cleanup(&record.view(), timeout).await
    } else {
        match sandbox_handle(record) {
            Ok(handle) => backend.destroy_sandbox(&record.id, handle, timeout).await,
            Err(_) => Ok(()),
        }
    }
}

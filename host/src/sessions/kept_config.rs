//! A session's config, kept by the session service for what needs it after `initialize`:
//! a fork starts its sessions with its origin's config (`front_door/snapshots`), so a fork
//! of a gVisor session, a non-root one or one with an egress list is the same sandbox, never
//! a weaker one. One key-value row in the session's scope, under the service's own owner,
//! written before the session is ready and dropped with it (`release::forget`). Kept only
//! for backends that can snapshot (what can be forked), and never shown by the API (a
//! config's `env` may carry secrets).

use super::SessionManager;
use crate::engines::KvScope;
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use serde_json::Value;

/// The key-value owner of the session service's own rows; not a backend name (those have
/// no `:`).
pub(super) const SESSION_KV_OWNER: &str = "wharf:sessions";
/// The key of a session's config among them.
const CONFIG_KEY: &str = "config";

impl SessionManager {
    /// Keeps `config` of session `id` when `backend` can be forked and the config says
    /// anything.
    pub(super) async fn keep_config(
        &self,
        backend: &LoadedBackend,
        id: &str,
        config: &Value,
    ) -> Result<(), WharfError> {
        if config.is_null() || !backend.behaviour().suspendable() {
            return Ok(());
        }
        let bytes = serde_json::to_vec(config)
            .map_err(|e| WharfError::internal(format!("encoding a session config: {e}")))?;
        self.store
            .kv_set(
                SESSION_KV_OWNER,
                &KvScope::Session(id.to_string()),
                CONFIG_KEY,
                &bytes,
            )
            .await
    }

    /// The config session `id` was created with, if one was kept. The caller has already
    /// checked that it may see the session.
    pub async fn kept_config(&self, id: &str) -> Result<Option<Value>, WharfError> {
        let Some(bytes) = self
            .store
            .kv_get(
                SESSION_KV_OWNER,
                &KvScope::Session(id.to_string()),
                CONFIG_KEY,
            )
            .await?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| WharfError::internal(format!("a kept session config: {e}")))
    }
}

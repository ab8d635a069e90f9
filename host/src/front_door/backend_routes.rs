//! The registry's operations under the host's names (what the adapters, the CLI and the
//! tests call), and what joins a swap to the sessions: after an upgrade or an operator's
//! hot load the backend's stored sessions are re-checked with the new version's
//! `discover`.

use super::Wharf;
use super::backend_summary::{BackendSummary, Deployment, FoundTool};
use crate::backend_status::{PendingUpgrade, Rejection};
use crate::config::{BackendConfig, OciSource};
use crate::error_code::{Code, WharfError};
use crate::registry::Deployed;
use crate::registry::Swapped;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::tool::ToolDescription;
use crate::tool_names::ToolName;
use anyhow::Result;
use std::sync::Arc;

impl Wharf {
    /// Loads or replaces `name` (one deployment at a time); with `check_permissions`, an
    /// upgrade that declares more than the running version is held as pending. A refusal
    /// is recorded for `/v1/backends` and leaves the running version serving.
    pub(super) async fn install(
        &self,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: BackendConfig,
        check_permissions: bool,
    ) -> Result<Deployed> {
        let turn = self.registry.deploy_turn().await;
        let (deployed, swapped) = self
            .registry
            .install(&turn, name, wasm, config, check_permissions)
            .await?;
        if let (Deployed::Active(loaded), Some(swapped)) = (&deployed, swapped) {
            self.recover_after_swap(loaded, swapped).await;
        }
        Ok(deployed)
    }

    /// Loads or replaces a backend as an operator's hot load does (plugins dir, admin
    /// route): an upgrade declaring more capabilities than the running version waits for
    /// [`Wharf::approve_backend`]; a component that fails to compile, validate or warm up
    /// answers 4000 and the running version keeps serving. Sessions of the backend are
    /// re-checked with the new version's `discover`.
    pub async fn deploy(
        &self,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: BackendConfig,
    ) -> Result<Deployment, WharfError> {
        Ok(
            match self
                .install(name, wasm, config, true)
                .await
                .map_err(|e| WharfError::new(Code::InvalidInput, format!("{e:#}")))?
            {
                Deployed::Active(loaded) => {
                    Deployment::Active(Box::new(BackendSummary::of(&loaded)))
                }
                Deployed::Pending(pending) => Deployment::Pending(pending),
            },
        )
    }

    /// Activates the upgrade of `name` that waits for approval; an uploaded one is kept
    /// for the next start.
    pub async fn approve_backend(&self, name: &str) -> Result<BackendSummary, WharfError> {
        let turn = self.registry.deploy_turn().await;
        let (loaded, swapped) = self.registry.approve(&turn, name).await?;
        self.recover_after_swap(&loaded, swapped).await;
        let summary = BackendSummary::of(&loaded);
        self.keep_approved_upload(name, &summary.sha256);
        Ok(summary)
    }

    /// Drops the upgrade of `name` that waits for approval; the running version keeps
    /// serving. 4002 when none waits.
    pub async fn reject_upgrade(&self, name: &str) -> Result<PendingUpgrade, WharfError> {
        let turn = self.registry.deploy_turn().await;
        self.registry.reject(&turn, name).await
    }

    /// Checks the backend's stored sessions with the (new) version's `discover`: the ones
    /// it rejects are removed, and their next use answers 4007 saying why.
    async fn recover_after_swap(&self, backend: &LoadedBackend, swapped: Swapped) {
        match self.sessions.recover(backend).await {
            Ok((report, adopted)) => match swapped.previous {
                Some(old) => {
                    let new = &backend.description.version;
                    self.sessions.note_ended(&report.removed, |id| format!(
                        "session `{id}` was ended when backend `{}` was upgraded (version {old} to {new}): the new version did not recognise it; create a new session",
                        backend.name
                    ));
                    if !report.removed.is_empty() {
                        tracing::info!(backend = %backend.name, removed = report.removed.len(), "sessions the new version rejected were removed");
                    }
                }
                None => {
                    for record in adopted {
                        self.watch_expiry(record.id);
                    }
                }
            },
            Err(e) => {
                tracing::warn!(backend = %backend.name, "session check after the swap failed: {}", e.message)
            }
        }
    }

    /// Unloads a backend (and any upgrade of it waiting for approval): new calls answer
    /// 5011 at once; returns after the calls in flight finished (or the deadline passed)
    /// and the old instances got `shutdown`. Then the containers it made on this node
    /// outside any session (a bridged stdio server, warm sandboxes) are removed: nothing
    /// would use them again. Its sessions keep theirs until they end.
    pub async fn unload_backend(&self, name: &str) -> Result<bool, WharfError> {
        let unloaded = self.registry.unload(name).await?;
        if unloaded && let Some(engine) = self.services.container_engine() {
            match engine.remove_unloaded(name).await {
                Ok(removed) if !removed.is_empty() => {
                    tracing::info!(
                        backend = name,
                        containers = removed.len(),
                        "removed the unloaded backend's containers"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    backend = name,
                    "the unloaded backend's containers stay: {e}"
                ),
            }
        }
        Ok(unloaded)
    }

    /// An operator's unload ([`Wharf::unload_backend`]): its upload, if it came from one,
    /// is forgotten too, so the next start does not load it again.
    pub async fn remove_backend(&self, name: &str) -> Result<bool, WharfError> {
        let unloaded = self.unload_backend(name).await?;
        self.forget_upload(name);
        Ok(unloaded)
    }

    /// Records why a component for `name` was refused (shown in `/v1/backends` until a
    /// load of `name` succeeds); the running version, if any, keeps serving.
    pub(crate) fn record_rejection(&self, name: &str, sha256: String, reason: String) {
        self.registry.record_rejection(name, sha256, reason);
    }

    /// The last refusal of `name` (cleared by a successful load) and its pending upgrade.
    pub fn backend_status(&self, name: &str) -> (Option<Rejection>, Option<PendingUpgrade>) {
        self.registry.backend_status(name)
    }

    /// Refusals of names that are not loaded (never were, or were unloaded since).
    pub fn rejected_backends(&self) -> Vec<(String, Rejection)> {
        self.registry.rejected_backends()
    }

    /// The backend a request names: loaded, or 5011 when the name was loaded or
    /// configured once (unloaded, or failed to load), or 4002 when this host never heard
    /// of it (a typo is the caller's fault, not worth a retry).
    pub(crate) fn requested_backend(&self, name: &str) -> Result<Arc<LoadedBackend>, WharfError> {
        self.registry.requested_backend(name)
    }

    /// Where a loaded `oci://` backend came from.
    pub fn backend_source(&self, name: &str) -> Option<OciSource> {
        self.registry.backend_config(name)?.oci_source
    }

    /// Every tool of every backend.
    pub fn tools(&self) -> Vec<(ToolName, String, ToolDescription)> {
        self.registry.tools()
    }

    /// Resolves a tool name (aliases, short names) to its backend and action.
    pub(super) fn resolve_tool(
        &self,
        requested: &str,
    ) -> Result<(Arc<LoadedBackend>, String), WharfError> {
        self.registry.resolve_tool(requested)
    }

    /// A tool by any of its names (aliases, short names); 4002 when there is none.
    pub fn find_tool(&self, requested: &str) -> Result<FoundTool, WharfError> {
        let (backend, action) = self.registry.resolve_tool(requested)?;
        let tool = backend
            .tool(&action)
            .ok_or_else(|| WharfError::invalid_request(format!("unknown tool `{requested}`")))?;
        Ok(FoundTool {
            backend: backend.name.to_string(),
            action,
            version: backend.description.version.clone(),
            tool,
        })
    }

    /// Says why a session is gone when an upgrade ended it.
    pub(super) fn explain_session_error(&self, e: WharfError, session: Option<&str>) -> WharfError {
        if e.code != Code::SessionNotFound {
            return e;
        }
        match session.and_then(|id| self.sessions.why_ended(id)) {
            Some(why) => WharfError::session_not_found(why),
            None => e,
        }
    }
}

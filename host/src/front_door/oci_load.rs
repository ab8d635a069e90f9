//! Backends whose `path` is an `oci://` reference (ARCHITECTURE.md, "Backends from OCI
//! registries"): pulled or read from the cache, checked (digests, layout, signature) and
//! only then compiled (`registry/oci_load`). A backend that cannot be had at start (registry unreachable and
//! nothing cached, or refused) is listed in `rejected` and tried again in the background;
//! the other backends serve meanwhile.

use super::{Deployment, Wharf};
use crate::config::BackendConfig;
use crate::error_code::{Code, WharfError};
use crate::oci::OciError;
use anyhow::Result;

impl Wharf {
    /// Loads an `oci://` backend at start. When its registry cannot be reached and nothing
    /// is cached, it is listed in `rejected` and tried again every `[oci] retry_seconds`
    /// until it loads; a refused one (digest, layout, signature, compile) is not retried.
    pub(super) async fn load_at_start(&self, name: &str, config: BackendConfig) {
        if let Err(e) = self.try_load_reference(name, config.clone()).await {
            tracing::warn!(backend = name, "not loaded at start, will retry: {e}");
            self.retry_in_background(name.to_string(), config);
        }
    }

    /// One attempt: Err only when trying again later may succeed.
    async fn try_load_reference(
        &self,
        name: &str,
        mut config: BackendConfig,
    ) -> Result<(), OciError> {
        let wasm = match self.registry.pull_component(name, &mut config).await {
            Ok(wasm) => wasm,
            Err(e) if e.is_retryable() => return Err(e),
            Err(e) => {
                tracing::warn!(backend = name, "refused: {e}");
                return Ok(());
            }
        };
        if let Err(e) = self.load_backend_bytes(name, wasm, config).await {
            // Recorded for /v1/backends; the same bytes would fail again.
            tracing::warn!(backend = name, "not loaded: {e:#}");
        }
        Ok(())
    }

    fn retry_in_background(&self, name: String, config: BackendConfig) {
        let weak = self.myself.clone();
        let interval = self.server.oci.retry_interval();
        let shutdown = self.shutdown.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(interval) => {}
                }
                let Some(wharf) = weak.upgrade() else {
                    return;
                };
                // Loaded meanwhile (an admin upload, the plugins directory): nothing to do.
                if wharf.backend(&name).is_ok() {
                    return;
                }
                match wharf.try_load_reference(&name, config.clone()).await {
                    Ok(()) => return,
                    Err(e) => tracing::debug!(backend = %name, "retry failed: {e}"),
                }
            }
        });
    }

    /// Pulls an `oci://` backend and deploys it as a hot load does ([`Wharf::deploy`]).
    pub async fn deploy_reference(
        &self,
        name: &str,
        mut config: BackendConfig,
    ) -> Result<Deployment, WharfError> {
        let wasm = self
            .registry
            .pull_component(name, &mut config)
            .await
            .map_err(|e| WharfError::new(Code::InvalidInput, e.to_string()))?;
        self.deploy(name, wasm, config).await
    }
}

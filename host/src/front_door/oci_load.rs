//! Backends whose `path` is an `oci://` reference (ARCHITECTURE.md, "Backends from OCI
//! registries"): pulled or read from the cache, checked (digests, layout, signature) and
//! only then compiled. A backend that cannot be had at start (registry unreachable and
//! nothing cached, or refused) is listed in `rejected` and tried again in the background;
//! the other backends serve meanwhile.

use super::{Deployed, Wharf};
use crate::config::{BackendConfig, OciSource};
use crate::error_code::{Code, WharfError};
use crate::oci::OciError;
use crate::runtime::loaded_backend::LoadedBackend;
use anyhow::Result;
use std::sync::Arc;

impl Wharf {
    /// Pulls the component of an `oci://` backend and notes where it came from in
    /// `config.oci_source`; a failure is recorded for `/v1/backends`.
    pub(super) async fn pull_component(
        &self,
        name: &str,
        config: &mut BackendConfig,
    ) -> Result<Arc<Vec<u8>>, OciError> {
        let require = config.require_signature || self.server.oci.require_signature;
        match self.oci.fetch(&config.path, require).await {
            Ok(fetched) => {
                tracing::info!(backend = name, reference = %config.path, resolved = %fetched.source.resolved, from_cache = fetched.source.from_cache, signature_verified = fetched.source.signature_verified, "component pulled");
                config.oci_source = Some(fetched.source);
                Ok(fetched.wasm)
            }
            Err(e) => {
                self.record_rejection(name, String::new(), e.to_string());
                Err(e)
            }
        }
    }

    /// The component `config` names: a file, `bundled:NAME`, or an `oci://` reference.
    pub(super) async fn component_for(
        &self,
        name: &str,
        config: &mut BackendConfig,
    ) -> Result<Arc<Vec<u8>>> {
        if config.is_oci() {
            return self
                .pull_component(name, config)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"));
        }
        anyhow::ensure!(
            !config.require_signature,
            "require_signature needs an oci:// path: a local file carries no signature (pin it with sha256)"
        );
        Ok(Arc::new(Self::read_wasm(&config.path)?))
    }

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
        let wasm = match self.pull_component(name, &mut config).await {
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
    ) -> Result<Deployed, WharfError> {
        let wasm = self
            .pull_component(name, &mut config)
            .await
            .map_err(|e| WharfError::new(Code::InvalidInput, e.to_string()))?;
        self.deploy(name, wasm, config).await
    }

    /// Where a loaded `oci://` backend came from.
    pub fn backend_source(&self, backend: &LoadedBackend) -> Option<OciSource> {
        self.backend_config(&backend.name)?.oci_source
    }
}

//! The component a backend's config names (ARCHITECTURE.md, "Backends from OCI
//! registries"): a file, `bundled:NAME`, or an `oci://` reference pulled or read from the
//! cache and checked (digests, layout, signature) before it is compiled. Retrying a
//! reference that could not be had at start is the front door's (`front_door/oci_load`).

use super::BackendRegistry;
use crate::config::BackendConfig;
use crate::oci::OciError;
use anyhow::Result;
use std::sync::Arc;

impl BackendRegistry {
    /// Pulls the component of an `oci://` backend and notes where it came from in
    /// `config.oci_source`; a failure is recorded for `/v1/backends`.
    pub async fn pull_component(
        &self,
        name: &str,
        config: &mut BackendConfig,
    ) -> Result<Arc<Vec<u8>>, OciError> {
        let require = config.require_signature || self.require_signature;
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
    pub async fn component_for(
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
}

//! The backend registry: what is loaded and how it got there. It owns the wasmtime engine,
//! the linker (`runtime::linker`), the compile cache, the backend table, the tool index and
//! its change channel, and the OCI registry client; it loads, replaces (hot swap, approval,
//! drain) and unloads backends, and resolves tool names. It knows nothing of sessions: the
//! front door re-checks a backend's sessions after a swap (ARCHITECTURE.md, layers).
//!
//! This file builds the registry and reads the table; `hot_swap` loads, replaces and
//! unloads, `lifecycle` keeps refusals, pending upgrades and unloaded names, `oci_load`
//! fetches the component a config names.

mod hot_swap;
mod lifecycle;
mod oci_load;
mod tool_polls;

pub use hot_swap::Swapped;
pub use lifecycle::{Deployed, PendingUpgrade, Rejection};
pub use tool_polls::start_tool_polls;

use crate::bundled;
use crate::config::{BackendConfig, ServerConfig};
use crate::error_code::WharfError;
use crate::imports::services::HostServices;
use crate::metrics::Metrics;
use crate::runtime::WharfEngine;
use crate::runtime::compile_cache::CompileCache;
use crate::runtime::host_state::HostState;
use crate::runtime::loaded_backend::{self, LoadedBackend};
use crate::store::StateStore;
use crate::tool::ToolDescription;
use crate::tool_names::{Resolution, ToolIndex, ToolName};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use wasmtime::component::Linker;

struct BackendEntry {
    loaded: Arc<LoadedBackend>,
    config: BackendConfig,
}

/// What a loaded backend is made with besides its component: the host's services, and
/// what warm pools and call timeouts default to.
pub struct RegistryParts {
    /// The engines imports reach (Docker, the store), quotas.
    pub services: Arc<HostServices>,
    /// The metrics recorder (compiles, loads, refusals).
    pub metrics: Arc<Metrics>,
    /// The state store (warm sandboxes' rows).
    pub store: StateStore,
    /// This node's id (warm sandboxes' rows).
    pub node_id: String,
}

/// The loaded backends, the engine they run on, and their tools.
pub struct BackendRegistry {
    engine: WharfEngine,
    linker: Linker<HostState>,
    cache: CompileCache,
    backends: RwLock<BTreeMap<String, BackendEntry>>,
    tool_index: RwLock<Arc<ToolIndex>>,
    tool_changes: tokio::sync::broadcast::Sender<()>,
    lifecycle: lifecycle::Lifecycle,
    oci: crate::oci::Registry,
    require_signature: bool,
    default_call_timeout_ms: u64,
    parts: RegistryParts,
}

fn poisoned() -> WharfError {
    WharfError::internal("backend table lock poisoned")
}

impl BackendRegistry {
    /// An empty registry; the compile cache and the OCI blob cache live under the data dir.
    pub fn new(server: &ServerConfig, parts: RegistryParts) -> Result<Self> {
        let engine = WharfEngine::new()?;
        let linker = crate::runtime::linker::linker(engine.engine())?;
        let cache = CompileCache::open(&server.data_dir.join("compile-cache"))?;
        // Pulled blobs live beside the compile cache (ARCHITECTURE.md, OCI).
        let oci = crate::oci::Registry::new(&server.oci, &server.data_dir.join("oci-cache"))?;
        Ok(Self {
            engine,
            linker,
            cache,
            backends: RwLock::new(BTreeMap::new()),
            tool_index: RwLock::new(Arc::new(ToolIndex::default())),
            tool_changes: tokio::sync::broadcast::channel(16).0,
            lifecycle: Default::default(),
            oci,
            require_signature: server.oci.require_signature,
            default_call_timeout_ms: server.default_call_timeout_ms,
            parts,
        })
    }

    /// Reads a backend's `.wasm` (a file, or `bundled:NAME`).
    pub fn read_wasm(path: &str) -> Result<Vec<u8>> {
        match path.strip_prefix("bundled:") {
            Some(name) => bundled::wasm(name).map(<[u8]>::to_vec).with_context(|| {
                format!(
                    "no bundled backend `{name}` (bundled: {})",
                    bundled::names().collect::<Vec<_>>().join(", ")
                )
            }),
            None => std::fs::read(PathBuf::from(path)).with_context(|| format!("reading {path}")),
        }
    }

    /// Compiles and describes a component without loading it (for `wharf inspect`).
    pub async fn inspect(
        &self,
        wasm: Vec<u8>,
    ) -> Result<crate::runtime::backend_description::BackendDescription> {
        let compiled = loaded_backend::compile(
            self.engine.engine(),
            &self.linker,
            &self.cache,
            Arc::new(wasm),
        )
        .await?;
        let mut description = compiled.description;
        if description.world == crate::runtime::world::WorldKind::SandboxProvider {
            crate::sandbox_toolset::ProviderBackend::describe(&mut description);
        }
        Ok(description)
    }

    /// Every loaded backend, by name.
    pub fn backends(&self) -> Vec<Arc<LoadedBackend>> {
        self.backends
            .read()
            .map(|b| b.values().map(|e| e.loaded.clone()).collect())
            .unwrap_or_default()
    }

    /// One backend, or 5011.
    pub fn backend(&self, name: &str) -> Result<Arc<LoadedBackend>, WharfError> {
        self.backends
            .read()
            .map_err(|_| poisoned())?
            .get(name)
            .map(|e| e.loaded.clone())
            .ok_or_else(|| {
                WharfError::backend_unavailable(format!("backend `{name}` is not loaded"))
            })
    }

    /// The config a loaded backend was loaded with.
    pub fn backend_config(&self, name: &str) -> Option<BackendConfig> {
        self.backends
            .read()
            .ok()?
            .get(name)
            .map(|e| e.config.clone())
    }

    /// Every tool of every backend.
    pub fn tools(&self) -> Vec<(ToolName, String, ToolDescription)> {
        let mut out = Vec::new();
        for backend in self.backends() {
            for tool in backend.tools().tools() {
                out.push((
                    ToolName {
                        backend: backend.name.to_string(),
                        action: tool.action.clone(),
                    },
                    backend.description.version.clone(),
                    tool.clone(),
                ));
            }
        }
        out
    }

    /// Resolves a tool name (aliases, short names) to its backend and action.
    pub fn resolve_tool(
        &self,
        requested: &str,
    ) -> Result<(Arc<LoadedBackend>, String), WharfError> {
        let index = self.tool_index.read().map_err(|_| poisoned())?.clone();
        match index.resolve(requested) {
            Resolution::Found(name) => {
                let backend = self.backend(&name.backend)?;
                match backend.tools().tool(&name.action) {
                    Some(_) => Ok((backend, name.action)),
                    None => Err(WharfError::invalid_request(format!(
                        "unknown tool `{requested}`"
                    ))),
                }
            }
            Resolution::Unknown => match self.unloaded_backend_in(requested) {
                Some(name) => Err(WharfError::backend_unavailable(format!(
                    "backend `{name}` is not loaded (it was unloaded)"
                ))),
                None => Err(WharfError::invalid_request(format!(
                    "unknown tool `{requested}`; GET /v1/tools lists them"
                ))),
            },
            Resolution::Ambiguous(candidates) => Err(WharfError::invalid_request(format!(
                "tool name `{requested}` is ambiguous: {}",
                candidates.join(", ")
            ))
            .with_data(serde_json::json!({ "candidates": candidates }))),
        }
    }

    /// Asks a backend that lists its tools for them (see [`LoadedBackend::refresh_tools`])
    /// and, when they changed, rebuilds the tool index and tells subscribers (MCP
    /// `list_changed`). True when they changed.
    pub async fn refresh_tools(&self, backend: &Arc<LoadedBackend>) -> Result<bool, WharfError> {
        let name = &*backend.name;
        let changed = backend.refresh_tools().await?;
        // A swap may have replaced this backend while it was asked: its table is then
        // no longer served, and the new one was indexed when it loaded.
        if changed && self.backend(name).is_ok_and(|b| Arc::ptr_eq(&b, backend)) {
            tracing::info!(
                backend = name,
                tools = backend.tools().tools().len(),
                "the backend's tools changed"
            );
            self.rebuild_tool_index();
        }
        Ok(changed)
    }

    fn rebuild_tool_index(&self) {
        let names = self.tools().into_iter().map(|(name, _, _)| name).collect();
        if let Ok(mut index) = self.tool_index.write() {
            *index = Arc::new(ToolIndex::new(names));
        }
        let _ = self.tool_changes.send(());
    }

    /// Notified whenever the set of tools changes (a backend loaded, replaced or unloaded).
    pub fn subscribe_tool_changes(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.tool_changes.subscribe()
    }

    /// Drains every backend (runs `shutdown` on idle instances) and the upgrades waiting
    /// for approval.
    pub async fn shutdown(&self) {
        for backend in self.backends() {
            backend.drain().await;
        }
        self.drain_pending().await;
    }
}

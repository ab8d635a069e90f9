//! The one front door the API layer calls: loaded backends, tool resolution, argument
//! validation, sessions, and calls. Nothing above this module touches wasmtime.
//!
//! This file builds the host and keeps the backend table; `tool_calls` runs tools,
//! `session_routes` acquires and releases sessions, `hot_swap` and `lifecycle` load,
//! replace and unload backends.

mod hot_swap;
mod invocation;
mod lifecycle;
mod oci_load;
mod quota_routes;
mod scrape;
mod session_routes;
mod temporary;
mod tool_calls;
mod uploads;

pub use invocation::{Invocation, InvocationResult, SessionChoice, WhenMissing};
pub use lifecycle::{Deployed, PendingUpgrade, Rejection, requires_beyond};
pub use session_routes::SessionRequest;
pub use tool_calls::{CallOutcome, CallPlace, CallRequest};

// What the front door hands the API layer, under the front door's own names, so no adapter
// imports the runtime, the sessions or the store (ARCHITECTURE.md, layers).
pub use crate::principal::Principal;
pub use crate::runtime::backend::{SLICE_BYTES, SandboxFiles};
pub use crate::runtime::guest_types::SessionView;
pub use crate::runtime::loaded_backend::LoadedBackend;
pub use crate::sessions::SessionRecord;
pub use crate::store::SessionState;

use crate::bundled;
use crate::config::{BackendConfig, ServerConfig, WharfConfig};
use crate::error_code::WharfError;
use crate::runtime::WharfEngine;
use crate::runtime::compile_cache::CompileCache;
use crate::runtime::host_state::{HostServices, HostState};
use crate::runtime::loaded_backend;
use crate::sessions::SessionManager;
use crate::store::StateStore;
use crate::tool_names::ToolIndex;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use wasmtime::component::Linker;

/// The tenant used until tokens exist: every caller is this one.
pub const ANONYMOUS_TENANT: &str = "anonymous";

struct BackendEntry {
    loaded: Arc<LoadedBackend>,
    config: BackendConfig,
}

/// The host: engine, backends, sessions.
pub struct Wharf {
    engine: WharfEngine,
    linker: Linker<HostState>,
    cache: CompileCache,
    backends: RwLock<BTreeMap<String, BackendEntry>>,
    tool_index: RwLock<Arc<ToolIndex>>,
    tool_changes: tokio::sync::broadcast::Sender<()>,
    shutdown: tokio_util::sync::CancellationToken,
    sessions: SessionManager,
    services: Arc<HostServices>,
    metrics: Arc<crate::metrics::Metrics>,
    node_id: String,
    server: ServerConfig,
    lifecycle: lifecycle::Lifecycle,
    oci: crate::oci::Registry,
    myself: Weak<Wharf>,
}

/// This node's id: kept in the data dir, so a restarted process is the same node.
fn node_id(data_dir: &std::path::Path) -> Result<String> {
    let path = data_dir.join("node-id");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_string());
    }
    let id = format!("node-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    crate::private_files::write_private(&path, id.as_bytes())?;
    Ok(id)
}

pub(crate) fn poisoned() -> WharfError {
    WharfError::internal("backend table lock poisoned")
}

impl Wharf {
    /// A host with no backends yet; the compile cache lives under the data dir.
    pub async fn new(server: ServerConfig) -> Result<Arc<Self>> {
        crate::private_files::create_private_dir(&server.data_dir)?;
        let engine = WharfEngine::new()?;
        let linker = crate::runtime::linker::linker(engine.engine())?;
        let cache = CompileCache::open(&server.data_dir.join("compile-cache"))?;
        let node_id = node_id(&server.data_dir)?;
        // Pulled blobs live beside the compile cache (ARCHITECTURE.md, OCI).
        let oci = crate::oci::Registry::new(&server.oci, &server.data_dir.join("oci-cache"))?;
        let store = match &server.store_url {
            Some(url) => StateStore::open(url).await?,
            None => StateStore::open_sqlite(&server.data_dir.join("wharf.db")).await?,
        };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let services = Arc::new(HostServices::new(
            &server,
            &node_id,
            store.clone(),
            metrics.clone(),
        )?);
        let wharf = Arc::new_cyclic(|myself| Self {
            services,
            metrics,
            node_id: node_id.clone(),
            engine,
            linker,
            cache,
            backends: RwLock::new(BTreeMap::new()),
            tool_index: RwLock::new(Arc::new(ToolIndex::default())),
            tool_changes: tokio::sync::broadcast::channel(16).0,
            shutdown: tokio_util::sync::CancellationToken::new(),
            sessions: SessionManager::new(store, node_id.clone(), server.lease()),
            server,
            lifecycle: Default::default(),
            oci,
            myself: myself.clone(),
        });
        wharf.start_heartbeat();
        Ok(wharf)
    }

    /// Builds a host and loads every enabled backend of `config`.
    pub async fn from_config(config: &WharfConfig) -> Result<Arc<Self>> {
        let wharf = Self::new(config.server.clone()).await?;
        for (name, backend) in &config.backends {
            if backend.enabled && backend.is_oci() {
                wharf.load_at_start(name, backend.clone()).await;
            } else if backend.enabled {
                wharf
                    .load_backend(name, backend.clone())
                    .await
                    .with_context(|| format!("loading backend `{name}`"))?;
            }
        }
        wharf.restore_uploads(&config.backends).await;
        wharf.recover_sessions().await;
        wharf.start_sweeper();
        Ok(wharf)
    }

    /// This node's id (labels containers `wharf.node`).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The metrics registry (`GET /metrics`).
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The server settings.
    pub fn server(&self) -> &ServerConfig {
        &self.server
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

    /// Compiles, describes, warms and registers a backend under `name`, replacing any
    /// backend of that name. `config.path` is a file, `bundled:NAME` or an `oci://`
    /// reference.
    pub async fn load_backend(
        &self,
        name: &str,
        mut config: BackendConfig,
    ) -> Result<Arc<LoadedBackend>> {
        let wasm = self.component_for(name, &mut config).await?;
        self.load_backend_bytes(name, wasm, config).await
    }

    /// Like [`Wharf::load_backend`], from bytes. The replaced version (if any) finishes
    /// its calls in flight and is drained in the background; no approval is asked (the
    /// operator's own config or code is loading it, unlike [`Wharf::deploy`]).
    pub async fn load_backend_bytes(
        &self,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: BackendConfig,
    ) -> Result<Arc<LoadedBackend>> {
        match self.install(name, wasm, config, false).await? {
            Deployed::Active(loaded) => Ok(loaded),
            Deployed::Pending(_) => Err(anyhow::anyhow!("backend `{name}` is pending approval")),
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

    pub(crate) fn backend_config(&self, name: &str) -> Option<BackendConfig> {
        self.backends
            .read()
            .ok()?
            .get(name)
            .map(|e| e.config.clone())
    }

    fn rebuild_tool_index(&self) {
        let names = self.tools().into_iter().map(|(name, _, _)| name).collect();
        if let Ok(mut index) = self.tool_index.write() {
            *index = Arc::new(ToolIndex::new(names));
        }
        let _ = self.tool_changes.send(());
    }

    /// Cancelled when the server begins to shut down: long-lived streams (MCP event
    /// streams) end so a graceful shutdown does not wait on them forever.
    pub fn shutdown_token(&self) -> &tokio_util::sync::CancellationToken {
        &self.shutdown
    }

    /// Notified whenever the set of tools changes (a backend loaded, replaced or unloaded).
    pub fn subscribe_tool_changes(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.tool_changes.subscribe()
    }

    /// Drains every backend (runs `shutdown` on idle instances). Sessions are kept.
    pub async fn shutdown(&self) {
        for backend in self.backends() {
            backend.drain().await;
        }
        self.drain_pending().await;
    }
}

//! The one front door the API layer calls: a thin facade over the backend registry
//! (`registry`: backends, tools, hot swaps) and the session service (`sessions`), with the
//! call path (`invocation`, `tool_calls`) that joins them. Nothing above this module
//! touches wasmtime.
//!
//! This file builds the host; `backend_routes` puts the registry's operations under the
//! host's names (and re-checks sessions after a swap), `tool_calls` runs tools,
//! `session_routes` acquires and releases sessions.

mod backend_routes;
mod backend_summary;
mod call_audit;
mod console_views;
mod invocation;
mod oci_load;
mod previews;
mod quota_routes;
mod sandbox_files;
mod sandbox_listing;
mod sandbox_transfer;
mod scrape;
mod session_archives;
mod session_pauses;
mod session_routes;
mod session_sandbox;
mod snapshots;
mod temporary;
mod terminals;
mod tool_calls;
mod uploads;
mod volume_sweep;
mod volumes;

pub use backend_summary::{BackendLimits, BackendSummary, Deployment, FoundTool, WarmPoolFill};
pub use console_views::GrantLine;
pub use invocation::{Invocation, InvocationResult, SessionChoice, WhenMissing};
pub use previews::{DEFAULT_PREVIEW_TTL_SECONDS, PreviewAccess, PreviewLink};
pub use sandbox_files::{
    DEFAULT_WATCH_SECONDS, FileWatch, MAX_WATCH_SECONDS, MAX_WATCHES, SandboxFiles,
};
pub use sandbox_listing::{EntryKind, MAX_ENTRIES, SandboxEntry, SandboxListing};
pub use sandbox_transfer::SandboxTransfer;
pub use session_routes::SessionRequest;
pub use terminals::{
    MAX_TERMINAL_COMMAND_BYTES, MAX_TERMINALS, Terminal, TerminalAccess, TerminalTarget,
    TerminalTicket,
};
pub use tool_calls::{CallOutcome, CallPlace};

pub use crate::principal::Principal;

use crate::config::{BackendConfig, ServerConfig, WharfConfig};
use crate::error_code::WharfError;
use crate::imports::container_turns::CreateTurns;
use crate::imports::services::HostServices;
use crate::registry::{BackendRegistry, Deployed, RegistryParts};
use crate::runtime::loaded_backend::LoadedBackend;
use crate::sessions::SessionManager;
use crate::store::StateStore;
use anyhow::{Context, Result};
use std::sync::{Arc, Weak};

/// The tenant used until tokens exist: every caller is this one.
pub const ANONYMOUS_TENANT: &str = "anonymous";

/// The host: the facade over the backend registry and the session service.
pub struct Wharf {
    registry: Arc<BackendRegistry>,
    sessions: Arc<SessionManager>,
    shutdown: tokio_util::sync::CancellationToken,
    services: Arc<HostServices>,
    metrics: Arc<crate::metrics::Metrics>,
    node_id: String,
    server: ServerConfig,
    myself: Weak<Wharf>,
    /// Where the preview listener is bound, once it is.
    preview_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The sandbox containers previews and terminals found.
    sandbox_targets: session_sandbox::SandboxTargets,
    /// Tool calls as they end, for whoever watches (the console's live view).
    live_calls: crate::live_calls::LiveCalls,
    /// Slots of the terminals open on this host.
    terminal_slots: Arc<tokio::sync::Semaphore>,
    /// Slots of the file watches open on this host.
    watch_slots: Arc<tokio::sync::Semaphore>,
    /// The host's preview key, once read from the store.
    preview_key: tokio::sync::OnceCell<Vec<u8>>,
    /// This node's volumes measured while no container mounted them (`volumes`).
    idle_volumes: volume_sweep::IdleVolumes,
}

/// The tenant whose quotas a session (or what it made) of `owner` counts against: the
/// admin's for a session with no tenant.
fn quota_tenant_of(owner: &str) -> &str {
    if owner.is_empty() {
        crate::quotas::ADMIN_TENANT
    } else {
        owner
    }
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

/// The services of a serving host, composed here and nowhere else: Docker as its container
/// engine with the sandbox agent placed in its containers (the disabled engine when no
/// client can be made for `server.docker_host`),
/// `store` as its key-value store and where creates take turns across nodes, `server`'s
/// quotas and buffer cap.
fn connect_services(
    server: &ServerConfig,
    node_id: &str,
    store: StateStore,
    metrics: Arc<crate::metrics::Metrics>,
) -> Result<HostServices> {
    let connected = match &server.docker_host {
        Some(host) => crate::docker::Docker::connect_to(host, node_id),
        None => crate::docker::Docker::connect(node_id),
    };
    let mut runtimes = std::collections::BTreeMap::new();
    for (level, runtime) in &server.runtimes {
        let level = crate::policy::Isolation::parse(level).with_context(|| {
            format!("server.runtimes: unknown isolation level {level:?} (container, gvisor)")
        })?;
        runtimes.insert(level, runtime.clone());
    }
    if let Ok(d) = &connected {
        d.map_runtimes(runtimes)?;
        d.resolve_egress_names(&server.egress_resolve);
    }
    let containers: Arc<dyn crate::engines::ContainerEngine> = match connected {
        Ok(d) if !server.sandbox_agent => Arc::new(d),
        Ok(d) => {
            match crate::docker::sandbox_agent::AgentPlacement::install(
                &server.data_dir,
                crate::bundled::SANDBOX_AGENT,
            ) {
                Ok(placement) => {
                    d.place_agent(placement);
                    // Sandboxes that outlived a previous host get their egress back.
                    let relinked = d.clone();
                    tokio::spawn(async move { relinked.relink_egress().await });
                }
                Err(e) => tracing::warn!(
                    "sandboxes run without the sandbox agent (commands go through the engine's exec): {e:#}"
                ),
            }
            Arc::new(d)
        }
        Err(e) => {
            tracing::warn!("no Docker engine: container imports will answer 5012 ({e})");
            Arc::new(crate::engines::DisabledEngine)
        }
    };
    Ok(HostServices {
        containers,
        create_turns: Arc::new(CreateTurns::new(node_id, Some(Arc::new(store.clone())))),
        kv: Arc::new(store),
        metrics,
        guest_buffer_cap: crate::bounded::GuestBufferCap(server.max_guest_buffer_bytes),
        quotas: Arc::new(crate::quotas::Quotas::new(server.quotas.clone())?),
        egress_budgets: Default::default(),
        kv_writes: Default::default(),
    })
}

impl Wharf {
    /// A host with no backends yet; the compile cache lives under the data dir.
    pub async fn new(server: ServerConfig) -> Result<Arc<Self>> {
        crate::private_files::create_private_dir(&server.data_dir)?;
        let node_id = node_id(&server.data_dir)?;
        let store = match &server.store_url {
            Some(url) => StateStore::open(url).await?,
            None => StateStore::open_sqlite(&server.data_dir.join("wharf.db")).await?,
        };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let services = Arc::new(connect_services(
            &server,
            &node_id,
            store.clone(),
            metrics.clone(),
        )?);
        let registry = BackendRegistry::new(
            &server,
            RegistryParts {
                services: services.clone(),
                metrics: metrics.clone(),
                store: store.clone(),
                node_id: node_id.clone(),
            },
        )?;
        let wharf = Arc::new_cyclic(|myself| Self {
            registry: Arc::new(registry),
            sessions: Arc::new(SessionManager::new(store, node_id.clone(), server.lease())),
            services,
            metrics,
            node_id,
            shutdown: tokio_util::sync::CancellationToken::new(),
            server,
            myself: myself.clone(),
            preview_addr: std::sync::OnceLock::new(),
            sandbox_targets: session_sandbox::SandboxTargets::default(),
            live_calls: crate::live_calls::LiveCalls::default(),
            terminal_slots: Arc::new(tokio::sync::Semaphore::new(terminals::MAX_TERMINALS)),
            watch_slots: Arc::new(tokio::sync::Semaphore::new(sandbox_files::MAX_WATCHES)),
            preview_key: tokio::sync::OnceCell::new(),
            idle_volumes: volume_sweep::IdleVolumes::default(),
        });
        wharf.sessions.start_heartbeat();
        crate::registry::start_tool_polls(&wharf.registry);
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
        BackendRegistry::read_wasm(path)
    }

    /// Compiles, describes, warms and registers a backend under `name`, replacing any
    /// backend of that name. `config.path` is a file, `bundled:NAME` or an `oci://`
    /// reference.
    pub async fn load_backend(
        &self,
        name: &str,
        mut config: BackendConfig,
    ) -> Result<Arc<LoadedBackend>> {
        let wasm = self.registry.component_for(name, &mut config).await?;
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
        self.registry.inspect(wasm).await
    }

    /// Every loaded backend, by name.
    pub fn backends(&self) -> Vec<BackendSummary> {
        self.registry
            .backends()
            .iter()
            .map(|b| BackendSummary::of(b))
            .collect()
    }

    /// Records where the preview listener is bound (the first time only).
    pub fn set_preview_addr(&self, addr: std::net::SocketAddr) {
        let _ = self.preview_addr.set(addr);
    }

    /// Where previews are served: the bound listener, or else the configured address.
    pub fn preview_addr(&self) -> Option<std::net::SocketAddr> {
        self.preview_addr
            .get()
            .copied()
            .or(self.server.preview_listen)
    }

    /// How many backends are loaded.
    pub fn backend_count(&self) -> usize {
        self.registry.backends().len()
    }

    /// One loaded backend itself, or 5011: for embedding the host and for tests (adapters
    /// see [`Wharf::backends`]).
    pub fn backend(&self, name: &str) -> Result<Arc<LoadedBackend>, WharfError> {
        self.registry.backend(name)
    }

    pub(crate) fn backend_config(&self, name: &str) -> Option<BackendConfig> {
        self.registry.backend_config(name)
    }

    /// Cancelled when the server begins to shut down: long-lived streams (MCP event
    /// streams) end so a graceful shutdown does not wait on them forever.
    pub fn shutdown_token(&self) -> &tokio_util::sync::CancellationToken {
        &self.shutdown
    }

    /// Notified whenever the set of tools changes (a backend loaded, replaced or unloaded).
    pub fn subscribe_tool_changes(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.registry.subscribe_tool_changes()
    }

    /// Drains every backend (runs `shutdown` on idle instances). Sessions are kept.
    pub async fn shutdown(&self) {
        self.registry.shutdown().await;
    }
}

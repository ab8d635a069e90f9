//! The one front door the API layer calls: loaded backends, tool resolution, argument
//! validation, sessions, and calls. Nothing above this module touches wasmtime.

mod hot_swap;
mod lifecycle;
mod session_routes;

pub use lifecycle::{Deployed, PendingUpgrade, Rejection, requires_beyond};

use crate::bundled;
use crate::config::{BackendConfig, ServerConfig, WharfConfig};
use crate::error_code::WharfError;
use crate::runtime::WharfEngine;
use crate::runtime::bindings;
use crate::runtime::compile_cache::CompileCache;
use crate::runtime::host_state::{HostServices, HostState};
use crate::runtime::loaded_backend::{
    self, LoadedBackend, SessionNeed, ToolCall, ToolDescription, ToolResult,
};
use crate::sessions::SessionManager;
use crate::store::StateStore;
use crate::tool_names::{Resolution, ToolIndex, ToolName};
use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;
use wasmtime::component::{HasSelf, Linker};

/// How long a node may hold a `creating` or `releasing` row before another takes over.
pub const SESSION_LEASE: Duration = Duration::from_secs(60);

/// The tenant used until tokens exist: every caller is this one.
pub const ANONYMOUS_TENANT: &str = "anonymous";

/// A request to run a tool.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// `backend:action` or an alias.
    pub tool: String,
    /// Arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The session to run in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Wall-clock limit; capped by the backend's own.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A request to create (or find again) a session.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    /// Backend name.
    pub backend: String,
    /// Caller's key; the same key gives the same session.
    #[serde(default)]
    pub key: Option<String>,
    /// Per-session config for `initialize`.
    #[serde(default)]
    pub config: Option<Value>,
    /// Idle TTL in s (0 = none); defaults to the backend's.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
    /// Owner claim.
    #[serde(default)]
    pub owner: Option<String>,
    /// Holder claim to take (refused with 4090 while another live holder holds it).
    #[serde(default)]
    pub holder: Option<String>,
}

/// What a call produced, with where it ran.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The canonical tool name.
    pub tool: String,
    /// The backend.
    pub backend: String,
    /// The session, if any.
    pub session_id: Option<String>,
    /// The result.
    pub result: ToolResult,
}

/// Where a failed call got to, for the envelope's `meta`.
#[derive(Debug, Clone, Default)]
pub struct CallPlace {
    /// Canonical tool name, once resolved.
    pub tool: Option<String>,
    /// Backend, once resolved.
    pub backend: Option<String>,
    /// Session, if given.
    pub session_id: Option<String>,
}

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
    myself: Weak<Wharf>,
}

fn linker(engine: &wasmtime::Engine) -> Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    use bindings::backend::wharf::plugin as wit;
    wit::types::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
    wit::log::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
    wit::kv::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
    wit::container::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
    wit::exec::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
    Ok(linker)
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
    std::fs::write(&path, &id).with_context(|| format!("writing {}", path.display()))?;
    Ok(id)
}

fn poisoned() -> WharfError {
    WharfError::internal("backend table lock poisoned")
}

impl Wharf {
    /// A host with no backends yet; the compile cache lives under the data dir.
    pub async fn new(server: ServerConfig) -> Result<Arc<Self>> {
        let engine = WharfEngine::new()?;
        let linker = linker(engine.engine())?;
        let cache = CompileCache::open(&server.data_dir.join("compile-cache"))?;
        let node_id = node_id(&server.data_dir)?;
        let connected = match &server.docker_host {
            Some(host) => crate::docker::Docker::connect_to(host, &node_id),
            None => crate::docker::Docker::connect(&node_id),
        };
        let docker = match connected {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!("no Docker engine: container imports will answer 5012 ({e})");
                None
            }
        };

        let store = match &server.store_url {
            Some(url) => StateStore::open(url).await?,
            None => StateStore::open_sqlite(&server.data_dir.join("wharf.db")).await?,
        };
        let metrics = Arc::new(crate::metrics::Metrics::new(
            Some(store.clone()),
            docker.clone(),
        ));
        let services = Arc::new(HostServices {
            docker,
            store: Some(store.clone()),
            metrics: metrics.clone(),
        });
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
            sessions: SessionManager::new(store, node_id.clone(), SESSION_LEASE),
            server,
            lifecycle: Default::default(),
            myself: myself.clone(),
        });
        wharf.start_heartbeat();
        Ok(wharf)
    }

    /// Builds a host and loads every enabled backend of `config`.
    pub async fn from_config(config: &WharfConfig) -> Result<Arc<Self>> {
        let wharf = Self::new(config.server.clone()).await?;
        for (name, backend) in &config.backends {
            if backend.enabled {
                wharf
                    .load_backend(name, backend.clone())
                    .await
                    .with_context(|| format!("loading backend `{name}`"))?;
            }
        }
        wharf.recover_sessions().await;
        wharf.start_reaper();
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
    /// backend of that name.
    pub async fn load_backend(
        &self,
        name: &str,
        config: BackendConfig,
    ) -> Result<Arc<LoadedBackend>> {
        let wasm = Arc::new(Self::read_wasm(&config.path)?);
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
    pub async fn inspect(&self, wasm: Vec<u8>) -> Result<loaded_backend::BackendDescription> {
        let compiled = loaded_backend::compile(
            self.engine.engine(),
            &self.linker,
            &self.cache,
            Arc::new(wasm),
        )
        .await?;
        Ok(compiled.description)
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

    /// Every tool of every backend.
    pub fn tools(&self) -> Vec<(ToolName, String, ToolDescription)> {
        let mut out = Vec::new();
        for backend in self.backends() {
            for tool in &backend.description.tools {
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
                match backend.tool(&name.action) {
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

    /// Runs a tool for `tenant`.
    pub async fn call(
        &self,
        tenant: &str,
        request: CallRequest,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)> {
        let started = std::time::Instant::now();
        // Redacting copies the arguments: only when the audit line is actually written.
        let args = tracing::enabled!(target: "wharf::audit", tracing::Level::INFO)
            .then(|| crate::redact::redact(&request.args))
            .unwrap_or_default();
        let outcome = self.call_unaudited(tenant, request, trace_id.clone()).await;
        let (code, tool, backend, session) = match &outcome {
            Ok(o) => (
                0,
                Some(o.tool.as_str()),
                Some(o.backend.as_str()),
                o.session_id.as_deref(),
            ),
            Err((e, place)) => (
                e.code.as_u32(),
                place.tool.as_deref(),
                place.backend.as_deref(),
                place.session_id.as_deref(),
            ),
        };
        let (tool, backend) = (tool.unwrap_or("-"), backend.unwrap_or("-"));
        let elapsed = started.elapsed();
        tracing::info!(
            target: "wharf::audit",
            event = "tool_call",
            tenant,
            tool,
            backend,
            session = session.unwrap_or("-"),
            duration_ms = elapsed.as_millis() as u64,
            code,
            trace_id = trace_id.as_deref().unwrap_or("-"),
            %args,
        );
        self.metrics.record_call(backend, tool, code, elapsed);
        outcome
    }

    async fn call_unaudited(
        &self,
        tenant: &str,
        request: CallRequest,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)> {
        let mut place = CallPlace {
            session_id: request.session_id.clone(),
            ..CallPlace::default()
        };
        let (backend, action) = self
            .resolve_tool(&request.tool)
            .map_err(|e| (e, place.clone()))?;
        place.tool = Some(format!("{}:{action}", backend.name));
        place.backend = Some(backend.name.to_string());
        let Some(tool) = backend.tool(&action) else {
            return Err((
                WharfError::invalid_request(format!("unknown tool `{}`", request.tool)),
                place,
            ));
        };
        self.call_resolved(tenant, &backend, tool, request, trace_id)
            .await
            .map_err(|e| {
                let e = self.explain_session_error(e, place.session_id.as_deref());
                (e, place.clone())
            })
    }

    async fn call_resolved(
        &self,
        tenant: &str,
        backend: &Arc<LoadedBackend>,
        tool: &ToolDescription,
        request: CallRequest,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, WharfError> {
        backend.validate_args(&tool.action, &request.args)?;
        let limit = backend.pool.settings().hook_timeout;
        let timeout = request
            .timeout_ms
            .map(Duration::from_millis)
            .map_or(limit, |t| t.min(limit));
        let canonical = format!("{}:{}", backend.name, tool.action);
        let session_id = match (&request.session_id, tool.session) {
            (_, SessionNeed::None) => None,
            (Some(id), _) => Some(id.clone()),
            (None, SessionNeed::Required) => {
                return Err(WharfError::session_not_found(format!(
                    "`{canonical}` needs a session: create one with POST /v1/sessions {{\"backend\": \"{}\"}} and pass its id as session_id",
                    backend.name
                )));
            }
            (None, SessionNeed::Optional) => None,
        };
        if !backend.is_resource_backend() && session_id.is_none() {
            return Err(WharfError::session_not_found(format!(
                "`{canonical}` runs in a sandbox: create one with POST /v1/sessions {{\"backend\": \"{}\"}} and pass its id as session_id",
                backend.name
            )));
        }
        let Some(session_id) = session_id else {
            let result = backend
                .call_tool(ToolCall {
                    action: tool.action.clone(),
                    args: request.args,
                    session: None,
                    timeout,
                    trace_id,
                })
                .await?;
            return Ok(CallOutcome {
                tool: canonical,
                backend: backend.name.to_string(),
                session_id: None,
                result,
            });
        };
        let record = self.sessions.get(tenant, &session_id).await?;
        if record.backend != *backend.name {
            return Err(WharfError::session_not_found(format!(
                "session `{session_id}` belongs to backend `{}`, not `{}`",
                record.backend, backend.name
            )));
        }
        let lock = self.sessions.call_lock(&session_id)?;
        let _one_at_a_time = lock.lock().await;
        // Re-read under the lock: the previous call may have changed the data.
        let record = self.sessions.get(tenant, &session_id).await?;
        let result = if backend.is_resource_backend() {
            backend
                .call_tool(ToolCall {
                    action: tool.action.clone(),
                    args: request.args,
                    session: Some(record.view()),
                    timeout,
                    trace_id,
                })
                .await
        } else {
            crate::sandbox_toolset::call(backend, &record, &tool.action, request.args, timeout)
                .await
        };
        let new_data = result.as_ref().ok().and_then(|r| r.session_data.clone());
        self.sessions.finish_call(&record, new_data).await?;
        Ok(CallOutcome {
            tool: canonical,
            backend: backend.name.to_string(),
            session_id: Some(session_id),
            result: result?,
        })
    }

    /// Drains every backend (runs `shutdown` on idle instances). Sessions are kept.
    pub async fn shutdown(&self) {
        for backend in self.backends() {
            backend.drain().await;
        }
        self.drain_pending().await;
    }
}

//! What every store carries: WASI with nothing granted, the imports' contexts (`wasi:http`
//! with the egress policy: `imports::http::HttpCtx`), the memory limiter, the per-call
//! context the host imports read, and the process-wide services (the engines) they use.

use crate::imports::container_turns::CreateTurns;
use crate::imports::http::HttpCtx;
use crate::imports::{CallContext, HostImportsView, ImportContexts};
use std::sync::Arc;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

/// Caps linear memory per instance and remembers the peak, for the pool's high-water mark.
#[derive(Debug)]
pub struct MemoryLimiter {
    limit_bytes: usize,
    peak_bytes: usize,
    denied: bool,
}

impl MemoryLimiter {
    /// A limiter with `limit_bytes` of linear memory.
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            limit_bytes,
            peak_bytes: 0,
            denied: false,
        }
    }
    /// The same limiter, remembering an earlier peak (the instance keeps its memory).
    pub fn with_peak(mut self, peak_bytes: usize) -> Self {
        self.peak_bytes = peak_bytes;
        self
    }
    /// The largest memory size seen.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }
    /// Whether a growth was refused (the guest hit its memory limit).
    pub fn denied(&self) -> bool {
        self.denied
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit_bytes {
            self.denied = true;
            return Ok(false);
        }
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Process-wide services the host imports use. Every engine is there: a host without
/// Docker or a store holds the disabled engine, which answers 5012.
#[derive(Debug)]
pub struct HostServices {
    /// The container engine (`container`, `exec`).
    pub containers: Arc<dyn crate::engines::ContainerEngine>,
    /// Where container creates take their backend's turn (`container`).
    pub create_turns: CreateTurns,
    /// The key-value store (`kv`).
    pub kv: Arc<dyn crate::engines::KvStore>,
    /// Where host imports record their calls.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The cap on what a guest has the host buffer for it (exec output, copy-out).
    pub guest_buffer_cap: crate::bounded::GuestBufferCap,
    /// Per-tenant quotas (pool shares, container counts).
    pub quotas: Arc<crate::quotas::Quotas>,
    /// Each backend's cap on outbound requests in flight (`http`).
    pub egress_budgets: crate::imports::http::EgressBudgets,
    /// The scopes whose quota check and write are under way on this node (`kv`).
    pub kv_writes: crate::engines::kv::ScopeWrites,
}

impl Default for HostServices {
    /// No engines (each answers 5012), no quotas: what `describe` runs with.
    fn default() -> Self {
        Self {
            containers: Arc::new(crate::engines::DisabledEngine),
            create_turns: Default::default(),
            kv: Arc::new(crate::engines::DisabledKvStore),
            metrics: Default::default(),
            guest_buffer_cap: Default::default(),
            quotas: Default::default(),
            egress_budgets: Default::default(),
            kv_writes: Default::default(),
        }
    }
}

impl HostServices {
    /// The services of a serving host: Docker as its container engine (the disabled
    /// engine when no client can be made for `server.docker_host`), `store` as its
    /// key-value store and where creates take turns across nodes, `server`'s quotas and
    /// buffer cap. A new engine is made here, and nowhere else.
    pub fn new(
        server: &crate::config::ServerConfig,
        node_id: &str,
        store: crate::store::StateStore,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> anyhow::Result<Self> {
        let connected = match &server.docker_host {
            Some(host) => crate::docker::Docker::connect_to(host, node_id),
            None => crate::docker::Docker::connect(node_id),
        };
        let containers: Arc<dyn crate::engines::ContainerEngine> = match connected {
            Ok(d) => Arc::new(d),
            Err(e) => {
                tracing::warn!("no Docker engine: container imports will answer 5012 ({e})");
                Arc::new(crate::engines::DisabledEngine)
            }
        };
        Ok(Self {
            containers,
            create_turns: CreateTurns::new(node_id, Some(store.clone())),
            kv: Arc::new(store),
            metrics,
            guest_buffer_cap: crate::bounded::GuestBufferCap(server.max_guest_buffer_bytes),
            quotas: Arc::new(crate::quotas::Quotas::new(server.quotas.clone())?),
            egress_budgets: Default::default(),
            kv_writes: Default::default(),
        })
    }

    /// The container engine when the host has one (the sweeps and the reaper skip the
    /// containers otherwise).
    pub fn container_engine(&self) -> Option<&dyn crate::engines::ContainerEngine> {
        self.containers
            .configured()
            .is_ok()
            .then_some(&*self.containers)
    }
}

/// The data of one store (one instance of one backend).
pub struct HostState {
    /// The backend's name as loaded.
    pub backend: Arc<str>,
    /// What the backend is granted.
    pub grants: Arc<crate::policy::Grants>,
    /// The engines and the recorder.
    pub services: Arc<HostServices>,
    /// The call in progress.
    pub call: CallContext,
    /// Memory cap and peak.
    pub limiter: MemoryLimiter,
    /// The host imports' own contexts.
    pub(crate) imports: ImportContexts,
    wasi: WasiCtx,
    http: HttpCtx,
    table: ResourceTable,
}

impl HostState {
    /// A state with no preopens, no env, no sockets and deny-by-default egress.
    pub fn new(
        backend: Arc<str>,
        memory_limit_bytes: usize,
        grants: Arc<crate::policy::Grants>,
        services: Arc<HostServices>,
    ) -> Self {
        let http = HttpCtx::new(
            backend.clone(),
            grants.clone(),
            services.metrics.clone(),
            &services.egress_budgets,
        );
        let wasi = WasiCtx::builder()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let imports = ImportContexts::new(backend.clone(), &grants, services.metrics.clone());
        Self {
            backend,
            grants,
            services,
            imports,
            call: CallContext::default(),
            limiter: MemoryLimiter::new(memory_limit_bytes),
            wasi,
            http,
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl HostState {
    /// Counts an answer of an import that still implements `Host` on `HostState`.
    pub(crate) fn counted<T>(
        &self,
        import: &str,
        answer: Result<
            T,
            crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error,
        >,
    ) -> wasmtime::Result<
        Result<T, crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error>,
    > {
        self.imports.counter().counted(import, answer)
    }
}

impl HostImportsView for HostState {
    fn host_imports(&mut self) -> &mut ImportContexts {
        &mut self.imports
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.http.view(&mut self.table)
    }
}

//! What every store carries: WASI with nothing granted, the wasi-http context with the
//! egress policy, the memory limiter, and the per-call context the host imports read.

use crate::imports::http::EgressHooks;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// The context of the call in progress; cleared at check-in so nothing leaks to the next.
#[derive(Debug, Default, Clone)]
pub struct CallContext {
    /// The session the call runs in.
    pub session_id: Option<String>,
    /// When the call must be over.
    pub deadline: Option<Instant>,
    /// Set by the epoch callback when it stopped the guest at the deadline.
    pub deadline_hit: bool,
    /// The request's trace id, for logs.
    pub trace_id: Option<String>,
    /// What the guest said (`log.panic`) before it trapped.
    pub panic: Option<String>,
}

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

/// Process-wide services the host imports use.
#[derive(Debug, Default)]
pub struct HostServices {
    /// The Docker engine, when one is configured.
    pub docker: Option<crate::docker::Docker>,
    /// The state store, for the `kv` import.
    pub store: Option<crate::store::StateStore>,
    /// Where host imports record their calls.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The cap on what a guest has the host buffer for it (exec output, copy-out).
    pub guest_buffer_cap: crate::bounded::GuestBufferCap,
    /// Per-tenant quotas (pool shares, container counts).
    pub quotas: Arc<crate::quotas::Quotas>,
}

/// The data of one store (one instance of one backend).
pub struct HostState {
    /// The backend's name as loaded.
    pub backend: Arc<str>,
    /// What the backend is granted.
    pub grants: Arc<crate::policy::Grants>,
    /// Docker and friends.
    pub services: Arc<HostServices>,
    /// The call in progress.
    pub call: CallContext,
    /// Memory cap and peak.
    pub limiter: MemoryLimiter,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    egress: EgressHooks,
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
        let egress = EgressHooks::new(backend.clone(), grants.clone())
            .with_metrics(services.metrics.clone());
        let wasi = WasiCtx::builder()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            backend,
            grants,
            services,
            call: CallContext::default(),
            limiter: MemoryLimiter::new(memory_limit_bytes),
            wasi,
            http: WasiHttpCtx::new(),
            egress,
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

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            hooks: &mut self.egress,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

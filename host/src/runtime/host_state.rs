//! What every store carries: WASI with nothing granted, the imports' contexts (`wasi:http`
//! with the egress policy: `imports::http::HttpCtx`; the others' `imports::ImportContexts`),
//! the memory limiter, the per-call context the host imports read, and the process-wide
//! services (the engines, `imports::services`) they use.

use crate::imports::http::HttpCtx;
use crate::imports::services::HostServices;
use crate::imports::{CallContext, HostImportsView, ImportContexts, ImportsView};
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

/// The data of one store (one instance of one backend).
pub struct HostState {
    /// The backend's name as loaded.
    pub backend: Arc<str>,
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
        let imports = ImportContexts::new(backend.clone(), &grants, &services);
        Self {
            backend,
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

impl HostImportsView for HostState {
    fn host_imports(&mut self) -> ImportsView<'_> {
        ImportsView {
            contexts: &self.imports,
            call: &mut self.call,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.http.view(&mut self.table)
    }
}

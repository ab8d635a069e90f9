//! Prometheus metrics for `GET /metrics`: counters and histograms recorded as things
//! happen (tool calls, host imports, backend loads), and gauges set at scrape time from a
//! [`Scrape`] the front door reads off the instance pools, the session store and Docker.
//! The recorder sits at the bottom: it imports none of what it measures.

mod scrape;
mod series_cache;
mod tenants;
mod warm_pool;

pub use scrape::{PoolCounts, Scrape};
pub use tenants::TenantMetrics;
pub use warm_pool::WarmPoolMetrics;

use series_cache::{Labels, SeriesCache};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabels {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    backend: String,
    tool: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    backend: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContractLabels {
    contract: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ImportLabels {
    backend: String,
    import: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CompileLabels {
    backend: String,
    cache: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    backend: String,
    event: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn call_histogram() -> Histogram {
    // 1 ms .. ~32 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn compile_histogram() -> Histogram {
    // 10 ms .. ~160 s.
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

/// A backend lifecycle event counted by `wharf_backend_events_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendEvent {
    /// A version was activated.
    Load,
    /// The backend was unloaded.
    Unload,
    /// A component was refused.
    Reject,
}

/// The host's metrics registry and the series recorded into it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_call_series: SeriesCache<Counter>,
    call_duration: HistogramFamily<BackendLabels>,
    call_duration_series: SeriesCache<Histogram>,
    instances: Family<StateLabels, Gauge>,
    discarded: Family<BackendLabels, Counter>,
    retired: Family<BackendLabels, Counter>,
    sessions: Family<StateLabels, Gauge>,
    containers: Family<BackendLabels, Gauge>,
    contracts: Family<ContractLabels, Gauge>,
    imports: Family<ImportLabels, Counter>,
    compile: HistogramFamily<CompileLabels>,
    events: Family<EventLabels, Counter>,
    audit_written: Counter,
    audit_dropped: Counter,
    warm_pool: WarmPoolMetrics,
    scrape: std::sync::Mutex<()>,
    /// Per-tenant series (quotas).
    pub tenants: TenantMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every series.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let tool_calls = Family::default();
        registry.register(
            "wharf_tool_calls",
            "Tool calls by backend, tool and result code",
            Family::clone(&tool_calls),
        );
        let call_duration: HistogramFamily<BackendLabels> =
            Family::new_with_constructor(call_histogram);
        registry.register(
            "wharf_tool_call_duration_seconds",
            "Tool call duration",
            call_duration.clone(),
        );
        let instances = Family::default();
        registry.register(
            "wharf_instances",
            "Instances per backend, idle or busy",
            Family::clone(&instances),
        );
        let discarded = Family::default();
        registry.register(
            "wharf_instances_discarded",
            "Instances discarded (trapped or timed out) by the current version",
            Family::clone(&discarded),
        );
        let retired = Family::default();
        registry.register(
            "wharf_instances_retired",
            "Instances retired (call count or memory) by the current version",
            Family::clone(&retired),
        );
        let sessions = Family::default();
        registry.register(
            "wharf_sessions",
            "Sessions in the store by backend and state",
            Family::clone(&sessions),
        );
        let containers = Family::default();
        registry.register(
            "wharf_containers",
            "Wharf-labelled containers on the Docker engine by backend",
            Family::clone(&containers),
        );
        let contracts = Family::default();
        registry.register(
            "wharf_backends_by_contract",
            "Loaded backends by the contract version they were built against (older ones are deprecated)",
            Family::clone(&contracts),
        );
        let imports = Family::default();
        registry.register(
            "wharf_host_import_calls",
            "Host import calls by backend, import and outcome",
            Family::clone(&imports),
        );
        let compile: HistogramFamily<CompileLabels> =
            Family::new_with_constructor(compile_histogram);
        registry.register(
            "wharf_backend_compile_seconds",
            "Backend compile (or cache load) time",
            compile.clone(),
        );
        let events = Family::default();
        registry.register(
            "wharf_backend_events",
            "Backend loads, unloads and rejections",
            Family::clone(&events),
        );
        let audit_written = Counter::default();
        registry.register(
            "wharf_audit_lines_written",
            "Audit lines the audit sink wrote",
            audit_written.clone(),
        );
        let audit_dropped = Counter::default();
        registry.register(
            "wharf_audit_lines_dropped",
            "Audit lines dropped: the audit queue was full ([audit] mode = \"drop\") or the write failed",
            audit_dropped.clone(),
        );
        let warm_pool = WarmPoolMetrics::register(&mut registry);
        let tenants = TenantMetrics::register(&mut registry);
        Self {
            tenants,
            registry,
            tool_calls,
            tool_call_series: SeriesCache::default(),
            call_duration,
            call_duration_series: SeriesCache::default(),
            instances,
            discarded,
            retired,
            sessions,
            containers,
            contracts,
            imports,
            compile,
            events,
            audit_written,
            audit_dropped,
            warm_pool,
            scrape: std::sync::Mutex::new(()),
        }
    }

    /// The warm pools' series.
    pub fn warm_pool(&self) -> &WarmPoolMetrics {
        &self.warm_pool
    }

    /// Records one tool call (`backend` and `tool` are `-` when unresolved).
    pub fn record_call(&self, backend: &str, tool: &str, code: u32, took: Duration) {
        self.tool_call_series
            .get(Labels(backend, tool, code), || {
                self.tool_calls.get_or_create_owned(&ToolCallLabels {
                    backend: backend.to_string(),
                    tool: tool.to_string(),
                    code: code.to_string(),
                })
            })
            .inc();
        self.call_duration_series
            .get(Labels(backend, "", 0), || {
                self.call_duration.get_or_create_owned(&BackendLabels {
                    backend: backend.to_string(),
                })
            })
            .observe(took.as_secs_f64());
    }

    /// Records one host import call and passes its answer through (a trap or a guest
    /// error counts as `error`).
    pub fn import_answer<T, E>(
        &self,
        backend: &str,
        import: &str,
        answer: wasmtime::Result<Result<T, E>>,
    ) -> wasmtime::Result<Result<T, E>> {
        self.record_import(backend, import, matches!(answer, Ok(Ok(_))));
        answer
    }

    /// Records one host import call.
    pub fn record_import(&self, backend: &str, import: &str, ok: bool) {
        self.imports
            .get_or_create(&ImportLabels {
                backend: backend.to_string(),
                import: import.to_string(),
                outcome: if ok { "ok" } else { "error" }.to_string(),
            })
            .inc();
    }

    /// Records a backend event.
    pub fn record_event(&self, backend: &str, event: BackendEvent) {
        let event = match event {
            BackendEvent::Load => "load",
            BackendEvent::Unload => "unload",
            BackendEvent::Reject => "reject",
        };
        self.events
            .get_or_create(&EventLabels {
                backend: backend.to_string(),
                event: event.to_string(),
            })
            .inc();
    }

    /// Records how long a backend took to compile (or load from the cache).
    /// `cache` is how the compile cache answered: `hit`, `compiled` or `rebuilt`.
    pub fn record_compile(&self, backend: &str, cache: &str, took: Duration) {
        self.compile
            .get_or_create(&CompileLabels {
                backend: backend.to_string(),
                cache: cache.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Sets the scrape-time series from `scrape` and encodes the registry.
    pub fn render(&self, scrape: Scrape) -> Result<String, std::fmt::Error> {
        // One scrape at a time: a series is cleared and set again as a whole.
        let _one_scrape_at_a_time = self.scrape.lock().map_err(|_| std::fmt::Error)?;
        self.instances.clear();
        self.discarded.clear();
        self.retired.clear();
        self.contracts.clear();
        for (contract, loaded) in scrape.contracts {
            self.contracts
                .get_or_create(&ContractLabels { contract })
                .set(i64::try_from(loaded).unwrap_or(i64::MAX));
        }
        for (backend, pool) in scrape.pools {
            for (state, n) in [("idle", pool.idle), ("busy", pool.busy)] {
                self.instances
                    .get_or_create(&StateLabels {
                        backend: backend.clone(),
                        state: state.to_string(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            let labels = BackendLabels { backend };
            self.discarded
                .get_or_create(&labels)
                .inner()
                .store(pool.discarded, Ordering::Relaxed);
            self.retired
                .get_or_create(&labels)
                .inner()
                .store(pool.retired, Ordering::Relaxed);
        }
        let audit = crate::audit::stats();
        self.audit_written
            .inner()
            .store(audit.written, Ordering::Relaxed);
        self.audit_dropped
            .inner()
            .store(audit.dropped, Ordering::Relaxed);
        self.sessions.clear();
        let mut sessions: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
        for key in scrape.sessions.unwrap_or_default() {
            *sessions.entry(key).or_default() += 1;
        }
        for ((backend, state), n) in sessions {
            self.sessions
                .get_or_create(&StateLabels {
                    backend,
                    state: state.to_string(),
                })
                .set(n);
        }
        self.containers.clear();
        let mut containers: BTreeMap<String, i64> = BTreeMap::new();
        for backend in scrape.containers.unwrap_or_default() {
            *containers.entry(backend).or_default() += 1;
        }
        for (backend, n) in containers {
            self.containers
                .get_or_create(&BackendLabels { backend })
                .set(n);
        }
        if let Some(tenants) = &scrape.tenant_sessions {
            self.tenants
                .set_sessions(tenants.iter().map(String::as_str));
        }
        if let Some(tenants) = &scrape.tenant_containers {
            self.tenants
                .set_containers(tenants.iter().map(String::as_str));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

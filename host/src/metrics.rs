//! Prometheus metrics for `GET /metrics`: counters and histograms recorded as things
//! happen (tool calls, host imports, backend loads), and gauges set at scrape time from a
//! [`Scrape`] the front door reads off the instance pools, the session store and Docker.
//! The recorder sits at the bottom: it imports none of what it measures.

mod families;
mod labels;
mod recent_health;
mod recent_refusals;
mod scrape;
mod series_cache;
mod tenants;
mod warm_pool;

pub use recent_health::{BackendHealth, HealthPoint, INTERVAL_SECONDS, WINDOW_SECONDS};
pub use scrape::{PoolCounts, Scrape};
pub use tenants::TenantMetrics;
pub use warm_pool::WarmPoolMetrics;

use families::{Buckets, HistogramFamily, Registrar};
use labels::{
    BackendLabels, CompileLabels, ContractLabels, EventLabels, ImportLabels, StateLabels,
    ToolCallLabels,
};
use series_cache::{CachedFamily, Labels};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    tool_calls: CachedFamily<ToolCallLabels, Counter>,
    call_duration: CachedFamily<BackendLabels, Histogram, Buckets>,
    instances: Family<StateLabels, Gauge>,
    discarded: Family<BackendLabels, Counter>,
    retired: Family<BackendLabels, Counter>,
    sessions: Family<StateLabels, Gauge>,
    containers: Family<BackendLabels, Gauge>,
    contracts: Family<ContractLabels, Gauge>,
    imports: CachedFamily<ImportLabels, Counter>,
    compile: HistogramFamily<CompileLabels>,
    events: Family<EventLabels, Counter>,
    audit_written: Counter,
    audit_dropped: Counter,
    warm_pool: WarmPoolMetrics,
    scrape: std::sync::Mutex<()>,
    /// Each backend's calls of the last minutes (the console's Health page).
    health: recent_health::RecentHealth,
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
        let mut r = Registrar(&mut registry);
        Self {
            tool_calls: CachedFamily::new(r.add(
                "wharf_tool_calls",
                "Tool calls by backend, tool and result code",
            )),
            call_duration: CachedFamily::new(r.add_histograms(
                "wharf_tool_call_duration_seconds",
                "Tool call duration",
                Buckets::CALL,
            )),
            instances: r.add("wharf_instances", "Instances per backend, idle or busy"),
            discarded: r.add(
                "wharf_instances_discarded",
                "Instances discarded (trapped or timed out) by the current version",
            ),
            retired: r.add(
                "wharf_instances_retired",
                "Instances retired (call count or memory) by the current version",
            ),
            sessions: r.add(
                "wharf_sessions",
                "Sessions in the store by backend and state",
            ),
            containers: r.add(
                "wharf_containers",
                "Wharf-labelled containers on the Docker engine by backend",
            ),
            contracts: r.add(
                "wharf_backends_by_contract",
                "Loaded backends by the contract version they were built against (older ones are deprecated)",
            ),
            imports: CachedFamily::new(r.add(
                "wharf_host_import_calls",
                "Host import calls by backend, import and outcome",
            )),
            compile: r.add_histograms(
                "wharf_backend_compile_seconds",
                "Backend compile (or cache load) time",
                Buckets::COMPILE,
            ),
            events: r.add(
                "wharf_backend_events",
                "Backend loads, unloads and rejections",
            ),
            audit_written: r.add(
                "wharf_audit_lines_written",
                "Audit lines the audit sink wrote",
            ),
            audit_dropped: r.add(
                "wharf_audit_lines_dropped",
                "Audit lines dropped: the audit queue was full ([audit] mode = \"drop\") or the write failed",
            ),
            warm_pool: WarmPoolMetrics::register(&mut r),
            tenants: TenantMetrics::register(&mut r),
            scrape: std::sync::Mutex::new(()),
            health: recent_health::RecentHealth::default(),
            // Last: `r` lends the registry until the series above are registered.
            registry,
        }
    }

    /// The warm pools' series.
    pub fn warm_pool(&self) -> &WarmPoolMetrics {
        &self.warm_pool
    }

    /// Records one tool call (`backend` and `tool` are `-` when unresolved).
    pub fn record_call(&self, backend: &str, tool: &str, code: u32, took: Duration) {
        self.tool_calls.with(
            Labels(backend, tool, code),
            || ToolCallLabels {
                backend: backend.to_string(),
                tool: tool.to_string(),
                code: code.to_string(),
            },
            |calls| calls.inc(),
        );
        self.call_duration.with(
            Labels(backend, "", 0),
            || BackendLabels {
                backend: backend.to_string(),
            },
            |duration| duration.observe(took.as_secs_f64()),
        );
        self.health
            .record(backend, code != 0, took, crate::clock::now_ms());
    }

    /// Each backend's calls/s, error rate, p50 and p99 over the last
    /// [`WINDOW_SECONDS`], by backend name.
    pub fn recent_health(&self) -> Vec<BackendHealth> {
        self.health.charts(crate::clock::now_ms())
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
        let outcome = if ok { "ok" } else { "error" };
        self.imports.with(
            Labels(backend, import, u32::from(ok)),
            || ImportLabels {
                backend: backend.to_string(),
                import: import.to_string(),
                outcome: outcome.to_string(),
            },
            |calls| calls.inc(),
        );
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
        if let Some(snapshots) = &scrape.tenant_snapshots {
            self.tenants
                .set_snapshots(snapshots.iter().map(|(t, n, b)| (t.as_str(), *n, *b)));
        }
        if let Some(volumes) = &scrape.tenant_volumes {
            self.tenants
                .set_volumes(volumes.iter().map(|(t, n, b)| (t.as_str(), *n, *b)));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{Metrics, Scrape};
    use std::time::Duration;

    fn line_value(text: &str, series: &str) -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn cached_series_are_the_ones_a_scrape_reads() {
        let m = Metrics::new();
        for _ in 0..3 {
            m.record_import("probe", "kv.set", true);
        }
        m.record_import("probe", "kv.set", false);
        m.record_call("echo", "ping", 0, Duration::from_millis(2));
        m.record_call("echo", "ping", 4002, Duration::from_millis(2));
        m.record_call("echo", "ping", 0, Duration::from_millis(2));
        m.tenants.record_refusal("alice", "calls_per_second");
        m.tenants.record_refusal("alice", "calls_per_second");
        m.tenants.record_refusal("alice", "sessions");
        let text = m.render(Scrape::default()).unwrap();
        let at = |series: &str| line_value(&text, series);
        let import = |outcome: &str| {
            at(&format!(
                r#"wharf_host_import_calls_total{{backend="probe",import="kv.set",outcome="{outcome}"}}"#
            ))
        };
        assert_eq!(import("ok"), Some(3), "{text}");
        assert_eq!(import("error"), Some(1), "{text}");
        let calls = |code: &str| {
            at(&format!(
                r#"wharf_tool_calls_total{{backend="echo",tool="ping",code="{code}"}}"#
            ))
        };
        assert_eq!(calls("0"), Some(2), "{text}");
        assert_eq!(calls("4002"), Some(1), "{text}");
        assert_eq!(
            at(r#"wharf_tool_call_duration_seconds_count{backend="echo"}"#),
            Some(3),
            "{text}"
        );
        let refusals = |limit: &str| {
            at(&format!(
                r#"wharf_tenant_refusals_total{{tenant="alice",limit="{limit}"}}"#
            ))
        };
        assert_eq!(refusals("calls_per_second"), Some(2), "{text}");
        assert_eq!(refusals("sessions"), Some(1), "{text}");
    }
}

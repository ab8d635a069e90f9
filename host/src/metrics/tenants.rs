//! Per-tenant series for `GET /metrics`: calls, refusals (4290 and quota 4030s), time
//! waited for an instance, and (at scrape time) sessions, containers and snapshots.

use super::families::{Buckets, Registrar};
use super::series_cache::{CachedFamily, Labels};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    tenant: String,
    limit: String,
}

/// The per-tenant series.
#[derive(Debug)]
pub struct TenantMetrics {
    calls: CachedFamily<TenantLabels, Counter>,
    refusals: CachedFamily<RefusalLabels, Counter>,
    queue_wait: CachedFamily<TenantLabels, Histogram, Buckets>,
    sessions: Family<TenantLabels, Gauge>,
    containers: Family<TenantLabels, Gauge>,
    snapshots: Family<TenantLabels, Gauge>,
    snapshot_bytes: Family<TenantLabels, Gauge>,
    volumes: Family<TenantLabels, Gauge>,
    volume_bytes: Family<TenantLabels, Gauge>,
    recent_refusals: super::recent_refusals::RecentRefusals,
}

impl TenantMetrics {
    /// Registers the series with `r`.
    pub(super) fn register(r: &mut Registrar<'_>) -> Self {
        Self {
            calls: CachedFamily::new(r.add("wharf_tenant_calls", "Tool calls by tenant")),
            refusals: CachedFamily::new(r.add(
                "wharf_tenant_refusals",
                "Calls and creations refused by a quota (4290, or 4030 for a count), by tenant and limit",
            )),
            queue_wait: CachedFamily::new(r.add_histograms(
                "wharf_tenant_queue_wait_seconds",
                "Time a call waited for a backend instance, by tenant",
                Buckets::QUEUE_WAIT,
            )),
            sessions: r.add("wharf_tenant_sessions", "Sessions in the store by tenant"),
            containers: r.add(
                "wharf_tenant_containers",
                "Wharf-labelled containers by the tenant of their session",
            ),
            snapshots: r.add("wharf_tenant_snapshots", "Snapshots kept by tenant"),
            snapshot_bytes: r.add(
                "wharf_tenant_snapshot_bytes",
                "Bytes the tenant's snapshots add to their base images",
            ),
            volumes: r.add("wharf_tenant_volumes", "Named volumes kept by tenant"),
            volume_bytes: r.add(
                "wharf_tenant_volume_bytes",
                "Bytes the tenant's named volumes held when the host last measured them",
            ),
            recent_refusals: Default::default(),
        }
    }

    fn labels(tenant: &str) -> TenantLabels {
        TenantLabels {
            tenant: tenant.to_string(),
        }
    }

    /// One tool call of `tenant`.
    pub fn record_call(&self, tenant: &str) {
        self.calls.with(
            Labels(tenant, "", 0),
            || Self::labels(tenant),
            |calls| calls.inc(),
        );
    }

    /// One refusal of `tenant` by `limit`.
    pub fn record_refusal(&self, tenant: &str, limit: &str) {
        self.refusals.with(
            Labels(tenant, limit, 0),
            || RefusalLabels {
                tenant: tenant.to_string(),
                limit: limit.to_string(),
            },
            |refusals| refusals.inc(),
        );
        self.recent_refusals
            .record(tenant, limit, crate::clock::now_ms());
    }

    /// `tenant`'s refusals of the last 15 minutes, by limit.
    pub fn recent_refusals(&self, tenant: &str) -> Vec<(String, u64)> {
        self.recent_refusals.of(tenant, crate::clock::now_ms())
    }

    /// How long one call of `tenant` waited for an instance.
    pub fn record_queue_wait(&self, tenant: &str, waited: Duration) {
        self.queue_wait.with(
            Labels(tenant, "", 0),
            || Self::labels(tenant),
            |wait| wait.observe(waited.as_secs_f64()),
        );
    }

    /// Sets the session gauges from one tenant name per session.
    pub fn set_sessions<'a>(&self, tenants: impl Iterator<Item = &'a str>) {
        Self::set(&self.sessions, tenants);
    }

    /// Sets the container gauges from one tenant name per container.
    pub fn set_containers<'a>(&self, tenants: impl Iterator<Item = &'a str>) {
        Self::set(&self.containers, tenants);
    }

    /// Sets the snapshot gauges from each tenant's (tenant, count, bytes).
    pub fn set_snapshots<'a>(&self, usage: impl Iterator<Item = (&'a str, u64, u64)>) {
        Self::set_usage(&self.snapshots, &self.snapshot_bytes, usage);
    }

    /// Sets the volume gauges from each tenant's (tenant, count, bytes).
    pub fn set_volumes<'a>(&self, usage: impl Iterator<Item = (&'a str, u64, u64)>) {
        Self::set_usage(&self.volumes, &self.volume_bytes, usage);
    }

    fn set_usage<'a>(
        counts: &Family<TenantLabels, Gauge>,
        sizes: &Family<TenantLabels, Gauge>,
        usage: impl Iterator<Item = (&'a str, u64, u64)>,
    ) {
        counts.clear();
        sizes.clear();
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for (tenant, count, bytes) in usage {
            counts
                .get_or_create(&Self::labels(tenant))
                .set(gauge(count));
            sizes.get_or_create(&Self::labels(tenant)).set(gauge(bytes));
        }
    }

    fn set<'a>(family: &Family<TenantLabels, Gauge>, tenants: impl Iterator<Item = &'a str>) {
        family.clear();
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for t in tenants {
            *counts.entry(t).or_default() += 1;
        }
        for (tenant, n) in counts {
            family.get_or_create(&Self::labels(tenant)).set(n);
        }
    }
}

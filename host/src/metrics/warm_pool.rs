//! Warm-pool series: sandboxes kept idle, hits and misses of sessions asking for one, and
//! how long a refill create takes.

use super::families::{Buckets, HistogramFamily, Registrar};
use super::labels::BackendLabels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::time::Duration;

/// The warm pools' series.
#[derive(Debug)]
pub struct WarmPoolMetrics {
    size: Family<BackendLabels, Gauge>,
    hits: Family<BackendLabels, Counter>,
    misses: Family<BackendLabels, Counter>,
    refill: HistogramFamily<BackendLabels>,
}

impl WarmPoolMetrics {
    /// Registers the series with `r`.
    pub(super) fn register(r: &mut Registrar<'_>) -> Self {
        Self {
            size: r.add("wharf_warm_pool_size", "Idle warm sandboxes per backend"),
            hits: r.add("wharf_warm_pool_hits", "Sessions that took a warm sandbox"),
            misses: r.add(
                "wharf_warm_pool_misses",
                "Sessions of a pooled shape that found no warm sandbox",
            ),
            refill: r.add_histograms(
                "wharf_warm_pool_refill_seconds",
                "Time to create one warm sandbox",
                Buckets::REFILL,
            ),
        }
    }

    fn labels(backend: &str) -> BackendLabels {
        BackendLabels {
            backend: backend.to_string(),
        }
    }

    /// The idle sandboxes `backend` holds now.
    pub fn set_size(&self, backend: &str, idle: usize) {
        self.size
            .get_or_create(&Self::labels(backend))
            .set(i64::try_from(idle).unwrap_or(i64::MAX));
    }

    /// A session took a warm sandbox (`hit`) or found none.
    pub fn record_take(&self, backend: &str, hit: bool) {
        let family = if hit { &self.hits } else { &self.misses };
        family.get_or_create(&Self::labels(backend)).inc();
    }

    /// One warm sandbox was created in `took`.
    pub fn record_refill(&self, backend: &str, took: Duration) {
        self.refill
            .get_or_create(&Self::labels(backend))
            .observe(took.as_secs_f64());
    }
}

//! Warm-pool series: sandboxes kept idle, hits and misses of sessions asking for one, and
//! how long a refill create takes.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    backend: String,
}

fn refill_histogram() -> Histogram {
    // 5 ms .. ~80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// The warm pools' series.
#[derive(Debug)]
pub struct WarmPoolMetrics {
    size: Family<PoolLabels, Gauge>,
    hits: Family<PoolLabels, Counter>,
    misses: Family<PoolLabels, Counter>,
    refill: Family<PoolLabels, Histogram, fn() -> Histogram>,
}

impl WarmPoolMetrics {
    /// Registers the series in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let size = Family::default();
        registry.register(
            "wharf_warm_pool_size",
            "Idle warm sandboxes per backend",
            Family::clone(&size),
        );
        let hits = Family::default();
        registry.register(
            "wharf_warm_pool_hits",
            "Sessions that took a warm sandbox",
            Family::clone(&hits),
        );
        let misses = Family::default();
        registry.register(
            "wharf_warm_pool_misses",
            "Sessions of a pooled shape that found no warm sandbox",
            Family::clone(&misses),
        );
        let refill: Family<PoolLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(refill_histogram);
        registry.register(
            "wharf_warm_pool_refill_seconds",
            "Time to create one warm sandbox",
            refill.clone(),
        );
        Self {
            size,
            hits,
            misses,
            refill,
        }
    }

    fn labels(backend: &str) -> PoolLabels {
        PoolLabels {
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

//! How the host's series are made and registered: each one is registered as it is made,
//! and the histograms' buckets are named once.

use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::hash::Hash;

/// Histograms whose buckets double from `start` seconds, `count` of them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Buckets {
    start: f64,
    count: u16,
}

impl Buckets {
    /// A tool call: 1 ms .. ~32 s.
    pub(super) const CALL: Self = Self::doubling(0.001, 16);
    /// A backend compile: 10 ms .. ~160 s.
    pub(super) const COMPILE: Self = Self::doubling(0.01, 15);
    /// A wait for an instance: 0.1 ms .. ~3 s.
    pub(super) const QUEUE_WAIT: Self = Self::doubling(0.0001, 16);
    /// A warm-pool refill: 5 ms .. ~80 s.
    pub(super) const REFILL: Self = Self::doubling(0.005, 15);

    const fn doubling(start: f64, count: u16) -> Self {
        Self { start, count }
    }
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, 2.0, self.count))
    }
}

/// A family of histograms with [`Buckets`].
pub(super) type HistogramFamily<L> = Family<L, Histogram, Buckets>;

/// Registers each series into one registry as it is made, and hands back the recorder's
/// handle to it.
pub(super) struct Registrar<'a>(pub(super) &'a mut Registry);

impl Registrar<'_> {
    /// A new series (a family, or a lone counter) registered as `name` with `help`.
    pub(super) fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.add_made(name, help, M::default())
    }

    /// A new family of histograms with `buckets`, registered as `name` with `help`.
    pub(super) fn add_histograms<L>(
        &mut self,
        name: &str,
        help: &str,
        buckets: Buckets,
    ) -> HistogramFamily<L>
    where
        L: Clone + Hash + Eq,
        HistogramFamily<L>: Metric,
    {
        self.add_made(name, help, Family::new_with_constructor(buckets))
    }

    fn add_made<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0.register(name, help, metric.clone());
        metric
    }
}

//! A pool's counters and the view of a pool from outside its world (`/v1/backends`,
//! metrics, benchmarks).

use super::{BoxFuture, GuestWorld, InstancePool};
use anyhow::Result;
use std::sync::atomic::{AtomicU64, AtomicUsize};

/// Counters for metrics and tests.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Instances created (and warmed).
    pub created: AtomicU64,
    /// Instances thrown away after a trap, a blown limit or a cancelled call.
    pub discarded: AtomicU64,
    /// Instances retired after N calls or the memory high-water mark.
    pub retired: AtomicU64,
    /// Calls in progress.
    pub busy: AtomicUsize,
}

/// Instance pool counters, for `/v1/backends` and metrics.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PoolStatus {
    /// Instances waiting for a call.
    pub idle: usize,
    /// Calls in progress.
    pub busy: usize,
    /// Instances created (and warmed).
    pub created: u64,
    /// Instances thrown away after a trap, a blown limit or a cancelled call.
    pub discarded: u64,
    /// Instances retired after N calls or the memory high-water mark.
    pub retired: u64,
}

/// A look at a pool from outside, whatever its world: counters and whether it drains.
pub trait PoolWatch: Send + Sync {
    /// Counters.
    fn status(&self) -> PoolStatus;
    /// Whether the pool is draining (its backend was replaced or unloaded).
    fn is_draining(&self) -> bool;
    /// Creates and warms one instance outside the pool and throws it away: what a call
    /// pays when no warm instance is idle (for benchmarks).
    fn fresh_instance(&self) -> BoxFuture<'_, Result<()>>;
}

impl<W: GuestWorld> PoolWatch for InstancePool<W> {
    fn status(&self) -> PoolStatus {
        InstancePool::status(self)
    }
    fn is_draining(&self) -> bool {
        InstancePool::is_draining(self)
    }
    fn fresh_instance(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.instantiate().await.map(drop) })
    }
}

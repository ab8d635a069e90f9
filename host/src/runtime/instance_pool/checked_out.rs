//! The instance lent to one call: checked in when the call finished cleanly, discarded
//! (and replaced in the background) when it was dropped any other way.

use super::{GuestWorld, Instance, InstancePool};
use crate::error_code::WharfError;
use crate::imports::CallContext;
use crate::quotas::GatePermit;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// An instance lent to one call. [`CheckedOut::checkin`] returns it; dropping it any other
/// way (a trap, a timeout, the caller went away) discards it: a store whose call did not
/// finish cleanly is never reused.
pub struct CheckedOut<W: GuestWorld> {
    pub(super) instance: Option<Instance<W>>,
    pub(super) pool: Arc<InstancePool<W>>,
    pub(super) _permit: GatePermit,
}

impl<W: GuestWorld> CheckedOut<W> {
    /// The instance.
    pub fn instance(&mut self) -> Result<&mut Instance<W>, WharfError> {
        self.instance
            .as_mut()
            .ok_or_else(|| WharfError::internal("instance already returned"))
    }

    /// Returns a healthy instance to the pool (or retires it), clearing the call context.
    pub fn checkin(mut self) {
        if let Some(mut instance) = self.instance.take() {
            self.pool.stats.busy.fetch_sub(1, Ordering::Relaxed);
            instance.store.data_mut().call = CallContext::default();
            instance.calls += 1;
            let settings = &self.pool.settings;
            let peak = instance.store.data().limiter.peak_bytes();
            if instance.calls >= settings.retire_after_calls
                || peak > settings.memory_high_water_bytes
            {
                self.pool.retire(instance);
            } else if let Some(instance) = self.pool.push_idle(instance) {
                self.pool.retire(instance);
            }
        }
    }
}

impl<W: GuestWorld> Drop for CheckedOut<W> {
    fn drop(&mut self) {
        if self.instance.take().is_some() {
            self.pool.stats.busy.fetch_sub(1, Ordering::Relaxed);
            self.pool.stats.discarded.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(backend = %self.pool.name, "instance discarded");
            self.pool.replenish();
        }
    }
}

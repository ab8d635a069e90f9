//! The fair gate's bookkeeping: who holds slots, who waits and in which turn, how each
//! tenant shares the pool and when it was last seen. Pure: no waiting, no channels beyond
//! the waiters' senders it keeps.

use super::{Fairness, GatePermit};
// Keyed by configured tenants, looked up several times per call: foldhash, not SipHash
// (ARCHITECTURE.md, "The path of one call").
use hashbrown::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a tenant's last call is remembered at most (the longest reserve allowed).
const LONGEST_RESERVE: Duration = Duration::from_secs(60);

#[derive(Default)]
pub(super) struct GateState {
    pub(super) in_use: usize,
    pub(super) held: HashMap<Arc<str>, usize>,
    /// Waiters per tenant, oldest first.
    pub(super) waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<GatePermit>>>,
    /// Tenants with waiters, in the order they are served next.
    pub(super) turns: VecDeque<Arc<str>>,
    /// How each tenant asked to share, last time it asked.
    pub(super) fairness: HashMap<Arc<str>, Fairness>,
    /// When each tenant last asked for or gave back a slot.
    pub(super) last_seen: HashMap<Arc<str>, Instant>,
    pub(super) closed: bool,
}

impl GateState {
    pub(super) fn grant(&mut self, tenant: &Arc<str>) {
        self.in_use += 1;
        *self.held.entry(tenant.clone()).or_default() += 1;
    }

    pub(super) fn ungrant(&mut self, tenant: &str) {
        self.in_use = self.in_use.saturating_sub(1);
        if let Some(n) = self.held.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.held.remove(tenant);
            }
        }
    }

    fn fairness_of(&self, tenant: &str) -> Fairness {
        self.fairness.get(tenant).copied().unwrap_or(Fairness {
            share: 1,
            reserve: Duration::ZERO,
        })
    }

    fn held_by(&self, tenant: &str) -> usize {
        self.held.get(tenant).copied().unwrap_or(0)
    }

    /// Whether `tenant` holds fewer slots than its share.
    pub(super) fn within_share(&self, tenant: &str) -> bool {
        self.held_by(tenant) < self.fairness_of(tenant).share.max(1)
    }

    /// Other tenants that called within `tenant`'s reserve window, hold no slot and do
    /// not wait (a waiting tenant is served by its turn, not by the reserve).
    fn reserved_against(&self, tenant: &str, now: Instant) -> usize {
        let window = self.fairness_of(tenant).reserve;
        if window.is_zero() {
            return 0;
        }
        self.last_seen
            .iter()
            .filter(|&(other, &seen)| {
                let other: &str = other;
                other != tenant
                    && now.saturating_duration_since(seen) < window
                    && !self.held.contains_key(other)
                    && !self.waiting.contains_key(other)
            })
            .count()
    }

    /// Whether `tenant` may take one of the free slots (the caller checked one is free):
    /// within its share always; past it only when the slots left afterwards cover the
    /// reserve for other recent tenants.
    pub(super) fn may_take(&self, tenant: &str, max: usize, now: Instant) -> bool {
        if self.within_share(tenant) {
            return true;
        }
        let free_after = max.saturating_sub(self.in_use).saturating_sub(1);
        free_after >= self.reserved_against(tenant, now)
    }

    pub(super) fn seen(&mut self, tenant: &Arc<str>, now: Instant) {
        match self.last_seen.get_mut(tenant) {
            Some(at) => *at = now,
            None => {
                // Tenants are configured tokens, so this stays small; still, forget the
                // ones no window can reach any more before remembering a new one.
                self.last_seen
                    .retain(|_, at| now.saturating_duration_since(*at) < LONGEST_RESERVE);
                self.last_seen.insert(tenant.clone(), now);
            }
        }
    }

    /// Forgets `tenant`'s waiters that gave up.
    pub(super) fn forget_gone(&mut self, tenant: &Arc<str>) {
        if let Some(queue) = self.waiting.get_mut(tenant) {
            queue.retain(|s| !s.is_closed());
            if queue.is_empty() {
                self.waiting.remove(tenant);
                self.turns.retain(|t| t != tenant);
            }
        }
    }
}

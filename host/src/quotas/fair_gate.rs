//! The admission gate of one instance pool: at most `max` calls hold an instance, and
//! when the pool is saturated the calls that wait are served round-robin across tenants
//! (not first come, first served), so a tenant flooding a backend cannot starve another.
//! While another tenant waits, a tenant is not given more than its share of `max`; when
//! nobody else waits it may use the rest of the pool, less a reserve: one instance stays
//! free for each other tenant that called within its reserve window and holds none now,
//! so an agent making sequential calls finds an instance free instead of waiting for a
//! flooding tenant's call to end. The reserve never takes a tenant below its share.

mod gate_state;

use gate_state::GateState;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Why a call got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateRefusal {
    /// No slot freed within the wait.
    Busy,
    /// The gate was closed (the pool is draining).
    Closed,
}

/// How one tenant shares the pool with the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fairness {
    /// Slots the tenant may hold while another tenant waits (at least one).
    pub share: usize,
    /// For how long after another tenant's last call a slot stays held back for it when
    /// this tenant is past its share (zero: no reserve).
    pub reserve: Duration,
}

/// The gate. Cheap to share: [`FairGate::acquire`] takes `&Arc<Self>`.
pub struct FairGate {
    state: Mutex<GateState>,
    max: usize,
}

/// A slot: given back (and the next waiter served) when dropped.
pub struct GatePermit {
    gate: Arc<FairGate>,
    tenant: Arc<str>,
    armed: bool,
}

impl std::fmt::Debug for GatePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatePermit")
            .field("tenant", &self.tenant)
            .finish()
    }
}

impl Drop for GatePermit {
    fn drop(&mut self) {
        if self.armed {
            self.gate.release(&self.tenant);
        }
    }
}

impl FairGate {
    /// A gate of `max` slots (at least one).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(GateState::default()),
            max: max.max(1),
        })
    }

    /// Slots in use.
    pub fn in_use(&self) -> usize {
        self.state.lock().map(|s| s.in_use).unwrap_or(0)
    }

    /// Waits up to `wait` for a slot for `tenant`, sharing the pool as `fairness` says.
    pub async fn acquire(
        self: &Arc<Self>,
        tenant: Arc<str>,
        fairness: Fairness,
        wait: Duration,
    ) -> Result<GatePermit, GateRefusal> {
        let mut receiver = {
            let Ok(mut state) = self.state.lock() else {
                return Err(GateRefusal::Closed);
            };
            if state.closed {
                return Err(GateRefusal::Closed);
            }
            let now = Instant::now();
            state.seen(&tenant, now);
            if state.fairness.get(&tenant) != Some(&fairness) {
                state.fairness.insert(tenant.clone(), fairness);
            }
            if state.in_use < self.max
                && state.turns.is_empty()
                && state.may_take(&tenant, self.max, now)
            {
                state.grant(&tenant);
                return Ok(self.permit(tenant));
            }
            let (sender, receiver) = oneshot::channel();
            let queue = state.waiting.entry(tenant.clone()).or_default();
            queue.push_back(sender);
            if queue.len() == 1 {
                state.turns.push_back(tenant.clone());
            }
            self.dispatch(&mut state);
            receiver
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // A slot held back by a reserve frees by itself when the reserve lapses, with
            // no release to hand it on: look again each reserve window.
            let wake = if fairness.reserve.is_zero() {
                deadline
            } else {
                deadline.min(tokio::time::Instant::now() + fairness.reserve)
            };
            match tokio::time::timeout_at(wake, &mut receiver).await {
                Ok(Ok(permit)) => return Ok(permit),
                Ok(Err(_)) => return Err(GateRefusal::Closed),
                Err(_) if tokio::time::Instant::now() < deadline => {
                    if let Ok(mut state) = self.state.lock() {
                        self.dispatch(&mut state);
                    }
                }
                Err(_) => {
                    // A permit sent as the wait ran out goes with the receiver and gives
                    // its slot back.
                    drop(receiver);
                    if let Ok(mut state) = self.state.lock() {
                        state.forget_gone(&tenant);
                    }
                    return Err(GateRefusal::Busy);
                }
            }
        }
    }

    fn permit(self: &Arc<Self>, tenant: Arc<str>) -> GatePermit {
        GatePermit {
            gate: self.clone(),
            tenant,
            armed: true,
        }
    }

    /// Gives free slots to waiters: the next tenant in turn that is within its share (or,
    /// when every waiting tenant is past it, the next in turn that the reserve lets take
    /// one), then that tenant goes to the back of the line. A slot that the reserve keeps
    /// from every waiter stays free.
    fn dispatch(self: &Arc<Self>, state: &mut GateState) {
        let now = Instant::now();
        while state.in_use < self.max && !state.turns.is_empty() {
            let within_share = state.turns.iter().position(|t| state.within_share(t));
            let index = within_share.or_else(|| {
                state
                    .turns
                    .iter()
                    .position(|t| state.may_take(t, self.max, now))
            });
            let Some(index) = index else { return };
            let Some(tenant) = state.turns.remove(index) else {
                return;
            };
            let sender = state.waiting.get_mut(&tenant).and_then(VecDeque::pop_front);
            let more = state.waiting.get(&tenant).is_some_and(|q| !q.is_empty());
            if more {
                state.turns.push_back(tenant.clone());
            } else {
                state.waiting.remove(&tenant);
            }
            let Some(sender) = sender else { continue };
            state.grant(&tenant);
            if let Err(mut unsent) = sender.send(self.permit(tenant.clone())) {
                // The waiter gave up (timed out or went away): the slot stays free.
                unsent.armed = false;
                state.ungrant(&tenant);
            }
        }
    }

    fn release(self: &Arc<Self>, tenant: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.ungrant(tenant);
            if let Some(seen) = state.last_seen.get_mut(tenant) {
                *seen = Instant::now();
            }
            self.dispatch(&mut state);
        }
    }

    /// Refuses every waiter and every later acquire.
    pub fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.closed = true;
            state.waiting.clear();
            state.turns.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(n: usize) -> Fairness {
        Fairness {
            share: n,
            reserve: Duration::ZERO,
        }
    }

    fn reserving(n: usize, reserve_ms: u64) -> Fairness {
        Fairness {
            share: n,
            reserve: Duration::from_millis(reserve_ms),
        }
    }

    /// Acquires without waiting: `None` when the gate would make the caller wait.
    async fn now(gate: &Arc<FairGate>, tenant: &Arc<str>, f: Fairness) -> Option<GatePermit> {
        gate.acquire(tenant.clone(), f, Duration::from_millis(1))
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_recent_tenant_finds_an_instance_held_back_from_a_flood() {
        let gate = FairGate::new(4);
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        drop(now(&gate, &b, reserving(2, 5_000)).await.unwrap());
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(now(&gate, &a, reserving(2, 5_000)).await.unwrap());
        }
        assert!(
            now(&gate, &a, reserving(2, 5_000)).await.is_none(),
            "the fourth instance is held back for b, who called a moment ago"
        );
        let b_call = now(&gate, &b, reserving(2, 5_000)).await;
        assert!(b_call.is_some(), "b is served at once while a floods");
        drop(b_call);
        drop(held.pop());
        held.push(now(&gate, &a, reserving(2, 5_000)).await.unwrap());
        assert!(
            now(&gate, &a, reserving(2, 5_000)).await.is_none(),
            "still held for b"
        );
        assert!(
            now(&gate, &a, reserving(2, 0)).await.is_some(),
            "a tenant with no reserve window does not hold one back"
        );
    }

    #[tokio::test]
    async fn the_reserve_lapses_without_a_release_and_never_cuts_below_a_share() {
        let gate = FairGate::new(4);
        let a: Arc<str> = Arc::from("a");
        let others: Vec<Arc<str>> = ["b", "c", "d"].into_iter().map(Arc::from).collect();
        for t in &others {
            drop(now(&gate, t, reserving(2, 60)).await.unwrap());
        }
        let first = now(&gate, &a, reserving(2, 60)).await.unwrap();
        let second = now(&gate, &a, reserving(2, 60)).await.unwrap();
        assert!(
            now(&gate, &a, reserving(2, 60)).await.is_none(),
            "three recent tenants: a keeps its share of two, not more"
        );
        let started = Instant::now();
        let third = gate
            .acquire(a.clone(), reserving(2, 60), Duration::from_secs(5))
            .await;
        assert!(
            third.is_ok(),
            "the reserve lapsed and the waiter was served"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        drop((first, second, third));
        assert_eq!(gate.in_use(), 0);
    }

    #[tokio::test]
    async fn waiters_are_served_round_robin_within_shares() {
        let gate = FairGate::new(2);
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let long = Duration::from_secs(5);
        let first = gate.acquire(a.clone(), share(1), long).await.unwrap();
        let second = gate.acquire(a.clone(), share(1), long).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, t) in [a.clone(), a.clone(), a.clone(), b.clone()]
            .into_iter()
            .enumerate()
        {
            let (gate, tx) = (gate.clone(), tx.clone());
            tokio::spawn(async move {
                let permit = gate.acquire(t.clone(), share(1), long).await;
                let _ = tx.send((i, t, permit.is_ok()));
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(permit);
            });
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(first);
        let (_, served, ok) = rx.recv().await.unwrap();
        assert!(ok);
        assert_eq!(&*served, "b", "b waited last but is served first");
        drop(second);
        let mut rest = 0;
        while rest < 3 {
            let (_, _, ok) = rx.recv().await.unwrap();
            assert!(ok);
            rest += 1;
        }
        assert!(gate.in_use() <= 2);
    }

    #[tokio::test]
    async fn a_waiter_past_the_wait_is_told_busy_and_closing_refuses() {
        let gate = FairGate::new(1);
        let t: Arc<str> = Arc::from("t");
        let held = gate
            .acquire(t.clone(), share(1), Duration::from_secs(1))
            .await
            .unwrap();
        let busy = gate
            .acquire(t.clone(), share(1), Duration::from_millis(20))
            .await;
        assert_eq!(busy.unwrap_err(), GateRefusal::Busy);
        drop(held);
        let again = gate
            .acquire(t.clone(), share(1), Duration::from_millis(20))
            .await;
        assert!(
            again.is_ok(),
            "the slot came back and the given-up waiter was forgotten"
        );
        drop(again);
        gate.close();
        assert_eq!(
            gate.acquire(t, share(1), Duration::from_millis(20))
                .await
                .unwrap_err(),
            GateRefusal::Closed
        );
    }
}

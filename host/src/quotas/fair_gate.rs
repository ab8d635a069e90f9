//! The admission gate of one instance pool: at most `max` calls hold an instance, and
//! when the pool is saturated the calls that wait are served round-robin across tenants
//! (not first come, first served), so a tenant flooding a backend cannot starve another.
//! While another tenant waits, a tenant is not given more than its share of `max`; when
//! nobody else waits it may use the whole pool (the gate never idles a free slot).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// Why a call got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateRefusal {
    /// No slot freed within the wait.
    Busy,
    /// The gate was closed (the pool is draining).
    Closed,
}

#[derive(Default)]
struct GateState {
    in_use: usize,
    held: HashMap<Arc<str>, usize>,
    /// Waiters per tenant, oldest first.
    waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<GatePermit>>>,
    /// Tenants with waiters, in the order they are served next.
    turns: VecDeque<Arc<str>>,
    /// The share each tenant asked with last.
    shares: HashMap<Arc<str>, usize>,
    closed: bool,
}

impl GateState {
    fn grant(&mut self, tenant: &Arc<str>) {
        self.in_use += 1;
        *self.held.entry(tenant.clone()).or_default() += 1;
    }

    fn ungrant(&mut self, tenant: &str) {
        self.in_use = self.in_use.saturating_sub(1);
        if let Some(n) = self.held.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.held.remove(tenant);
            }
        }
    }

    fn others_waiting(&self, tenant: &str) -> bool {
        self.turns.iter().any(|t| &**t != tenant)
    }

    fn within_share(&self, tenant: &str) -> bool {
        let share = self.shares.get(tenant).copied().unwrap_or(1).max(1);
        self.held.get(tenant).copied().unwrap_or(0) < share || !self.others_waiting(tenant)
    }

    /// Forgets `tenant`'s waiters that gave up.
    fn forget_gone(&mut self, tenant: &Arc<str>) {
        if let Some(queue) = self.waiting.get_mut(tenant) {
            queue.retain(|s| !s.is_closed());
            if queue.is_empty() {
                self.waiting.remove(tenant);
                self.turns.retain(|t| t != tenant);
            }
        }
    }
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

    /// Waits up to `wait` for a slot for `tenant`, who may hold at most `share` slots
    /// while another tenant waits.
    pub async fn acquire(
        self: &Arc<Self>,
        tenant: Arc<str>,
        share: usize,
        wait: Duration,
    ) -> Result<GatePermit, GateRefusal> {
        let receiver = {
            let Ok(mut state) = self.state.lock() else {
                return Err(GateRefusal::Closed);
            };
            if state.closed {
                return Err(GateRefusal::Closed);
            }
            state.shares.insert(tenant.clone(), share.max(1));
            if state.in_use < self.max && state.turns.is_empty() {
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
        match tokio::time::timeout(wait, receiver).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(GateRefusal::Closed),
            Err(_) => {
                if let Ok(mut state) = self.state.lock() {
                    state.forget_gone(&tenant);
                }
                Err(GateRefusal::Busy)
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
    /// when every waiting tenant is past it, the next in turn), then that tenant goes to
    /// the back of the line.
    fn dispatch(self: &Arc<Self>, state: &mut GateState) {
        while state.in_use < self.max && !state.turns.is_empty() {
            let index = state
                .turns
                .iter()
                .position(|t| state.within_share(t))
                .unwrap_or(0);
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

    #[tokio::test]
    async fn waiters_are_served_round_robin_within_shares() {
        let gate = FairGate::new(2);
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let long = Duration::from_secs(5);
        let first = gate.acquire(a.clone(), 1, long).await.unwrap();
        let second = gate.acquire(a.clone(), 1, long).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, t) in [a.clone(), a.clone(), a.clone(), b.clone()]
            .into_iter()
            .enumerate()
        {
            let (gate, tx) = (gate.clone(), tx.clone());
            tokio::spawn(async move {
                let permit = gate.acquire(t.clone(), 1, long).await;
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
            .acquire(t.clone(), 1, Duration::from_secs(1))
            .await
            .unwrap();
        let busy = gate.acquire(t.clone(), 1, Duration::from_millis(20)).await;
        assert_eq!(busy.unwrap_err(), GateRefusal::Busy);
        drop(held);
        let again = gate.acquire(t.clone(), 1, Duration::from_millis(20)).await;
        assert!(
            again.is_ok(),
            "the slot came back and the given-up waiter was forgotten"
        );
        drop(again);
        gate.close();
        assert_eq!(
            gate.acquire(t, 1, Duration::from_millis(20))
                .await
                .unwrap_err(),
            GateRefusal::Closed
        );
    }
}

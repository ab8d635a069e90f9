//! A pool of warm instances per backend: grows on demand up to `pool_max` (which is also
//! the backend's concurrency limit), keeps `pool_min` warm, retires an instance after N
//! calls or past a memory high-water mark, and discards one that trapped, blew a limit or
//! was dropped mid-call (cancelled), replacing it in the background. When every instance
//! is busy, waiting calls are served round-robin across tenants (`quotas::FairGate`).

use crate::error_code::WharfError;
use crate::imports::CallContext;
use crate::imports::services::HostServices;
use crate::policy::Grants;
use crate::quotas::{FairGate, GatePermit, GateRefusal};
use crate::runtime::host_state::HostState;
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::{Store, UpdateDeadline};

mod checked_out;
mod guest_world;
mod status;

pub use checked_out::CheckedOut;
pub use guest_world::{BoxFuture, GuestWorld, IndexedPre, WorldIndices};
pub(crate) use guest_world::{on_guest, versioned_guest_world};
pub use status::{PoolStats, PoolStatus, PoolWatch};

/// Sizing and retirement of one pool.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Instances kept warm.
    pub min: usize,
    /// Most instances (and concurrent calls).
    pub max: usize,
    /// Retire an instance after this many calls.
    pub retire_after_calls: u64,
    /// Retire an instance whose memory grew past this.
    pub memory_high_water_bytes: usize,
    /// Linear memory cap per instance.
    pub memory_limit_bytes: usize,
    /// How long a call may wait for an instance.
    pub queue_timeout: Duration,
    /// Deadline for `warmup` and `shutdown`.
    pub hook_timeout: Duration,
}

/// One instance: its store, its exports and how many calls it served.
pub struct Instance<W: GuestWorld> {
    /// The store (one per instance).
    pub store: Store<HostState>,
    /// The exported interface.
    pub exports: W::Exports,
    calls: u64,
}

/// The pool of one backend.
pub struct InstancePool<W: GuestWorld> {
    name: Arc<str>,
    pre: W,
    settings: PoolSettings,
    warmup_config: String,
    grants: Arc<Grants>,
    services: Arc<HostServices>,
    idle: Mutex<Vec<Instance<W>>>,
    gate: Arc<FairGate>,
    /// Set (under the `idle` lock) by [`InstancePool::drain`]: from then on an instance
    /// checked in or warmed is shut down instead of kept.
    draining: AtomicBool,
    /// Counters.
    pub stats: PoolStats,
}

/// Installs the deadline callback: while the call's deadline is ahead, a running guest
/// yields to the executor at every epoch tick (so spinning guests cannot starve the
/// workers); once it has passed, the guest traps and the flag says why.
fn arm_deadline(store: &mut Store<HostState>) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let call = &mut ctx.data_mut().call;
        match call.deadline {
            Some(deadline) if Instant::now() >= deadline => {
                call.deadline_hit = true;
                Err(wasmtime::Error::msg("the call exceeded its deadline"))
            }
            // tokio's own yield puts the task behind the others; a bare self-wake would
            // take the worker's LIFO slot and starve them.
            _ => Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            )),
        }
    });
}

impl<W: GuestWorld> InstancePool<W> {
    /// A pool with `settings.min` instances created and warmed; fails if one cannot be.
    pub async fn start(
        name: Arc<str>,
        pre: W,
        settings: PoolSettings,
        warmup_config: String,
        grants: Arc<Grants>,
        services: Arc<HostServices>,
    ) -> Result<Arc<Self>> {
        let pool = Arc::new(Self {
            name,
            grants,
            services,
            pre,
            gate: FairGate::new(settings.max),
            settings,
            warmup_config,
            idle: Mutex::new(Vec::new()),
            draining: AtomicBool::new(false),
            stats: PoolStats::default(),
        });
        for _ in 0..pool.settings.min.max(1) {
            let instance = pool.instantiate().await?;
            if let Some(instance) = pool.push_idle(instance) {
                pool.retire(instance);
            }
        }
        Ok(pool)
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings.
    pub fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    /// Instances waiting for a call.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// Counters.
    pub fn status(&self) -> PoolStatus {
        PoolStatus {
            idle: self.idle_count(),
            busy: self.stats.busy.load(Ordering::Relaxed),
            created: self.stats.created.load(Ordering::Relaxed),
            discarded: self.stats.discarded.load(Ordering::Relaxed),
            retired: self.stats.retired.load(Ordering::Relaxed),
        }
    }

    /// Whether the pool is draining (its backend was replaced or unloaded).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Keeps an idle instance, or hands it back when the pool is draining (checked under
    /// the same lock `drain` takes, so none slips in after the drain emptied the pool).
    #[must_use]
    fn push_idle(&self, instance: Instance<W>) -> Option<Instance<W>> {
        match self.idle.lock() {
            Ok(mut idle) if !self.draining.load(Ordering::Acquire) => {
                idle.push(instance);
                None
            }
            _ => Some(instance),
        }
    }

    fn pop_idle(&self) -> Option<Instance<W>> {
        self.idle.lock().ok().and_then(|mut idle| idle.pop())
    }

    /// A new instance, warmed up.
    pub async fn instantiate(&self) -> Result<Instance<W>> {
        let state = HostState::new(
            self.name.clone(),
            self.settings.memory_limit_bytes,
            self.grants.clone(),
            self.services.clone(),
        );
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        arm_deadline(&mut store);
        store.data_mut().call.deadline = Some(Instant::now() + self.settings.hook_timeout);
        let exports = self.pre.instantiate(&mut store).await?;
        let config = self.warmup_config.clone();
        let warmed = tokio::time::timeout(
            self.settings.hook_timeout,
            W::warmup(&exports, &mut store, &config),
        )
        .await
        .map_err(|_| {
            anyhow!(
                "warmup did not finish within {:?}",
                self.settings.hook_timeout
            )
        })??;
        if let Err(e) = warmed {
            return Err(anyhow!("warmup failed: {} ({})", e.message, e.code));
        }
        store.data_mut().call = CallContext::default();
        self.stats.created.fetch_add(1, Ordering::Relaxed);
        Ok(Instance {
            store,
            exports,
            calls: 0,
        })
    }

    /// Takes an instance for one call, waiting up to the queue timeout for a free one.
    pub async fn checkout(
        self: &Arc<Self>,
        context: CallContext,
    ) -> Result<CheckedOut<W>, WharfError> {
        let permit = self.admit(&context.tenant).await?;
        let mut instance = match self.pop_idle() {
            Some(instance) => instance,
            None => self.instantiate().await.map_err(|e| {
                WharfError::backend_unavailable(format!(
                    "backend `{}` could not start an instance: {e:#}",
                    self.name
                ))
            })?,
        };
        instance.store.data_mut().call = context;
        instance.store.data_mut().limiter =
            crate::runtime::host_state::MemoryLimiter::new(self.settings.memory_limit_bytes)
                .with_peak(instance.store.data().limiter.peak_bytes());
        arm_deadline(&mut instance.store);
        self.stats.busy.fetch_add(1, Ordering::Relaxed);
        Ok(CheckedOut {
            instance: Some(instance),
            pool: self.clone(),
            _permit: permit,
        })
    }

    /// A slot for `tenant`, within its share of the pool, waiting up to
    /// the queue timeout; past it the answer is "busy" (5011, retryable), which is not the
    /// backend's fault and not a blown call deadline.
    async fn admit(self: &Arc<Self>, tenant: &Arc<str>) -> Result<GatePermit, WharfError> {
        let fairness = self
            .services
            .quotas
            .limits(tenant, Some(&*self.name))
            .fairness(self.settings.max);
        let started = Instant::now();
        let admitted = self
            .gate
            .acquire(tenant.clone(), fairness, self.settings.queue_timeout)
            .await;
        let tenants = &self.services.metrics.tenants;
        tenants.record_queue_wait(tenant, started.elapsed());
        admitted.map_err(|refusal| match refusal {
            GateRefusal::Busy => {
                tenants.record_refusal(tenant, "pool_busy");
                let waited = u64::try_from(self.settings.queue_timeout.as_millis()).unwrap_or(u64::MAX);
                WharfError::backend_unavailable(format!(
                    "backend `{}` is busy: its {} instances stayed in use for the queue timeout of {waited} ms; retry later",
                    self.name, self.settings.max
                ))
                .retryable(true)
                .with_data(serde_json::json!({
                    "reason": "busy",
                    "pool_max": self.settings.max,
                    "queue_timeout_ms": waited,
                    "retry_after_ms": 1000,
                }))
            }
            GateRefusal::Closed => {
                WharfError::backend_unavailable(format!("backend `{}` is unloading", self.name))
            }
        })
    }

    fn replenish(self: &Arc<Self>) {
        if self.is_draining() || self.idle_count() >= self.settings.min {
            return;
        }
        let pool = self.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                match pool.instantiate().await {
                    Ok(instance) if pool.idle_count() < pool.settings.min => {
                        if let Some(instance) = pool.push_idle(instance) {
                            pool.retire(instance);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(backend = %pool.name, "could not replace a discarded instance: {e:#}"),
                }
            });
        }
    }

    fn retire(self: &Arc<Self>, mut instance: Instance<W>) {
        self.stats.retired.fetch_add(1, Ordering::Relaxed);
        let timeout = self.settings.hook_timeout;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                instance.store.data_mut().call.deadline = Some(Instant::now() + timeout);
                let _ = tokio::time::timeout(timeout, shutdown(&mut instance)).await;
            });
        }
        self.replenish();
    }

    /// Marks the pool draining, runs `shutdown` on every idle instance and drops them, and
    /// refuses new checkouts. Instances still out are shut down when they come back.
    pub async fn drain(&self) {
        let idle: Vec<Instance<W>> = self
            .idle
            .lock()
            .map(|mut v| {
                self.draining.store(true, Ordering::Release);
                std::mem::take(&mut *v)
            })
            .unwrap_or_default();
        self.draining.store(true, Ordering::Release);
        for mut instance in idle {
            instance.store.data_mut().call.deadline =
                Some(Instant::now() + self.settings.hook_timeout);
            let _ = tokio::time::timeout(self.settings.hook_timeout, shutdown(&mut instance)).await;
        }
        self.gate.close();
    }
}

async fn shutdown<W: GuestWorld>(instance: &mut Instance<W>) {
    let Instance { store, exports, .. } = instance;
    if let Err(e) = W::shutdown(exports, store).await {
        tracing::warn!(backend = %store.data().backend, "shutdown trapped: {e:#}");
    }
}

//! A provider backend's warm pool (ARCHITECTURE.md, "Warm sandboxes"): per sandbox shape
//! (the spec a session config asks for, lifetime aside), up to `size` sandboxes created
//! ahead through the provider contract (`create`), each recorded in the store first
//! (`store/warm_rows`). A session whose shape matches takes one: it is checked with
//! `is-alive` (a dead one is destroyed, never handed out) and claimed in the store with
//! one compare-and-set, so it goes to exactly one session; the pool then refills in the
//! background, at most `refill_concurrency` creates at a time. Idle sandboxes past
//! `max_idle_seconds` are destroyed and replaced; `drain` (unload, upgrade, host stop)
//! destroys every idle one.

use crate::clock::now_ms;
use crate::config::{WarmPoolConfig, toml_to_json};
use crate::error_code::WharfError;
use crate::metrics::Metrics;
use crate::runtime::guest_types::SandboxSpec;
use crate::runtime::provider_component::ProviderComponent;
use crate::store::StateStore;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The session-id prefix of the pool's sandboxes: provider calls for them carry
/// `wharf-pool-<uuid>`, so their containers are labelled with it (and `wharf.pool`).
pub use crate::engines::container_types::POOL_SESSION_PREFIX as POOL_ID_PREFIX;
use crate::quotas::host_tenant;

/// How often idle sandboxes are checked for age and the pool topped up.
const TICK: Duration = Duration::from_secs(2);

/// What a pool needs besides its provider.
pub struct WarmSetup {
    /// `[backends.X.warm_pool]`.
    pub config: WarmPoolConfig,
    /// Where takes are claimed.
    pub store: StateStore,
    /// This node's id (rows record who made them).
    pub node: String,
    /// Where the pool's series go.
    pub metrics: Arc<Metrics>,
    /// The backend's session lifetime cap, s (0 = none), as for any session.
    pub max_lifetime_seconds: u64,
}

/// A sandbox handed to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The pool's id for it (its row, its containers' session label).
    pub id: String,
    /// The provider's handle.
    pub handle: String,
}

struct Warm {
    id: String,
    handle: String,
    since: Instant,
}

#[derive(Default)]
struct Shape {
    idle: VecDeque<Warm>,
    filling: usize,
}

struct Inner {
    backend: String,
    provider: Arc<ProviderComponent>,
    store: StateStore,
    node: String,
    metrics: Arc<Metrics>,
    size: usize,
    max_idle: Option<Duration>,
    concurrency: usize,
    permits: Semaphore,
    /// Shape key (lifetime cleared) → the spec to create with, and what is warm.
    shapes: HashMap<SandboxSpec, (SandboxSpec, Mutex<Shape>)>,
    closed: AtomicBool,
    creating: AtomicUsize,
}

/// A backend's warm pools, one per configured shape.
pub struct WarmPool {
    inner: Arc<Inner>,
}

/// The shape a spec belongs to: everything but its lifetime (the host enforces a
/// session's lifetime itself).
fn shape_key(spec: &SandboxSpec) -> SandboxSpec {
    SandboxSpec {
        lifetime_seconds: None,
        ..spec.clone()
    }
}

impl WarmPool {
    /// Starts filling the configured shapes in the background; `None` when the size is 0.
    pub fn start(
        backend: &str,
        provider: Arc<ProviderComponent>,
        setup: WarmSetup,
    ) -> Result<Option<Self>, WharfError> {
        if setup.config.size == 0 {
            return Ok(None);
        }
        let configs: Vec<Value> = if setup.config.shapes.is_empty() {
            vec![Value::Null]
        } else {
            setup.config.shapes.iter().map(toml_to_json).collect()
        };
        let mut shapes = HashMap::new();
        for config in &configs {
            let spec = super::session_spec::sandbox_spec(config, None, setup.max_lifetime_seconds)?;
            shapes.insert(shape_key(&spec), (spec, Mutex::new(Shape::default())));
        }
        let concurrency = setup.config.refill_concurrency.max(1) as usize;
        let inner = Arc::new(Inner {
            backend: backend.to_string(),
            provider,
            store: setup.store,
            node: setup.node,
            metrics: setup.metrics,
            size: setup.config.size as usize,
            max_idle: (setup.config.max_idle_seconds > 0)
                .then(|| Duration::from_secs(setup.config.max_idle_seconds)),
            concurrency,
            permits: Semaphore::new(concurrency),
            shapes,
            closed: AtomicBool::new(false),
            creating: AtomicUsize::new(0),
        });
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(tick(Arc::downgrade(&inner)));
        }
        Ok(Some(Self { inner }))
    }

    /// A warm sandbox of `spec`'s shape for `session`, alive and claimed for it in the
    /// store; `None` when the shape is not pooled or none is ready (create one as usual).
    pub async fn take(&self, spec: &SandboxSpec, session: &str) -> Option<Taken> {
        let inner = &self.inner;
        let key = shape_key(spec);
        let (_, shape) = inner.shapes.get(&key)?;
        let taken = loop {
            let next = lock(shape).idle.pop_back();
            let Some(warm) = next else { break None };
            if inner.too_old(&warm) || !inner.alive(&warm).await {
                inner.destroy_later(warm);
                continue;
            }
            match inner.store.claim_warm(&warm.id, session).await {
                Ok(true) => {
                    break Some(Taken {
                        id: warm.id,
                        handle: warm.handle,
                    });
                }
                // The sweeper or another taker has it: it is not ours to hand out.
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(backend = %inner.backend, "claiming a warm sandbox failed: {}", e.message);
                    lock(shape).idle.push_back(warm);
                    break None;
                }
            }
        };
        inner
            .metrics
            .warm_pool()
            .record_take(&inner.backend, taken.is_some());
        refill(inner, &key);
        taken
    }

    /// A taken sandbox was destroyed with its session: forget its row.
    pub async fn forget(&self, id: &str) -> Result<(), WharfError> {
        self.inner.store.delete_warm(id).await
    }

    /// Idle sandboxes of every shape, now.
    pub fn idle(&self) -> usize {
        self.inner.idle()
    }

    /// Sandboxes it keeps when full (its size per shape, times the shapes).
    pub fn kept(&self) -> usize {
        self.inner.size.saturating_mul(self.inner.shapes.len())
    }

    /// Stops refilling and destroys every idle sandbox (creates in flight destroy theirs
    /// when they end; this waits for them up to the provider's hook timeout).
    pub async fn drain(&self) {
        let inner = &self.inner;
        inner.closed.store(true, Ordering::SeqCst);
        let idle: Vec<Warm> = inner
            .shapes
            .values()
            .flat_map(|(_, shape)| lock(shape).idle.drain(..).collect::<Vec<_>>())
            .collect();
        inner.metrics.warm_pool().set_size(&inner.backend, 0);
        futures::stream::iter(idle)
            .for_each_concurrent(inner.concurrency, |warm| inner.destroy(warm))
            .await;
        let deadline = Instant::now() + inner.provider.settings().hook_timeout;
        while inner.creating.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn lock(shape: &Mutex<Shape>) -> std::sync::MutexGuard<'_, Shape> {
    shape
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    fn idle(&self) -> usize {
        self.shapes
            .values()
            .map(|(_, shape)| lock(shape).idle.len())
            .sum()
    }

    fn publish_size(&self) {
        self.metrics
            .warm_pool()
            .set_size(&self.backend, self.idle());
    }

    fn too_old(&self, warm: &Warm) -> bool {
        self.max_idle.is_some_and(|max| warm.since.elapsed() > max)
    }

    async fn alive(&self, warm: &Warm) -> bool {
        let site = self.provider.hook_site(host_tenant(), &warm.id);
        match self.provider.is_alive(site, &warm.handle).await {
            Ok(alive) => alive,
            Err(e) => {
                tracing::debug!(backend = %self.backend, sandbox = %warm.id, "is-alive of a warm sandbox failed: {}", e.message);
                false
            }
        }
    }

    /// Destroys a sandbox through its provider and forgets its row (kept for the sweeper
    /// when the destroy fails).
    async fn destroy(&self, warm: Warm) {
        let site = self.provider.hook_site(host_tenant(), &warm.id);
        match self.provider.destroy(site, &warm.handle).await {
            Ok(()) => {
                if let Err(e) = self.store.delete_warm(&warm.id).await {
                    tracing::warn!(sandbox = %warm.id, "forgetting a warm sandbox failed: {}", e.message);
                }
            }
            Err(e) => {
                tracing::warn!(backend = %self.backend, sandbox = %warm.id, "destroying a warm sandbox failed: {}", e.message)
            }
        }
    }

    fn destroy_later(self: &Arc<Self>, warm: Warm) {
        let inner = self.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { inner.destroy(warm).await });
        }
    }

    /// Creates one sandbox of `spec`, recorded first so a crash mid-create leaves a row
    /// the sweeper finishes.
    async fn create(&self, spec: &SandboxSpec) -> Result<Warm, WharfError> {
        let id = format!("{POOL_ID_PREFIX}{}", uuid::Uuid::new_v4().simple());
        self.store
            .insert_warming(&id, &self.backend, &self.node, now_ms() as i64)
            .await?;
        let begun = Instant::now();
        let handle = match self
            .provider
            .create(
                self.provider.hook_site(host_tenant(), &id),
                spec.clone(),
                crate::runtime::backend::SandboxGrant::default(),
            )
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                let _ = self.store.delete_warm(&id).await;
                return Err(e);
            }
        };
        let warm = Warm {
            id,
            handle,
            since: Instant::now(),
        };
        if !self.store.warm_ready(&warm.id, &warm.handle).await? {
            self.destroy(warm).await;
            return Err(WharfError::internal("the warm sandbox's row was swept"));
        }
        self.metrics
            .warm_pool()
            .record_refill(&self.backend, begun.elapsed());
        Ok(warm)
    }
}

/// Starts creates until the shape holds `size` sandboxes (idle or being made).
fn refill(inner: &Arc<Inner>, key: &SandboxSpec) {
    let Some((spec, shape)) = inner.shapes.get(key) else {
        return;
    };
    if inner.closed.load(Ordering::SeqCst) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let wanted = {
        let mut s = lock(shape);
        let wanted = inner.size.saturating_sub(s.idle.len() + s.filling);
        s.filling += wanted;
        wanted
    };
    for _ in 0..wanted {
        let (inner, key, spec) = (inner.clone(), key.clone(), spec.clone());
        inner.creating.fetch_add(1, Ordering::SeqCst);
        runtime.spawn(async move {
            let made = match inner.permits.acquire().await {
                Ok(_permit) if !inner.closed.load(Ordering::SeqCst) => {
                    Some(inner.create(&spec).await)
                }
                _ => None,
            };
            if let Some((_, shape)) = inner.shapes.get(&key) {
                lock(shape).filling -= 1;
            }
            match made {
                Some(Ok(warm)) if inner.closed.load(Ordering::SeqCst) => inner.destroy(warm).await,
                Some(Ok(warm)) => {
                    if let Some((_, shape)) = inner.shapes.get(&key) {
                        lock(shape).idle.push_back(warm);
                    }
                    inner.publish_size();
                }
                Some(Err(e)) => {
                    tracing::warn!(backend = %inner.backend, "creating a warm sandbox failed: {}", e.message)
                }
                None => {}
            }
            inner.creating.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Now and every [`TICK`] while the pool lives: destroys idle sandboxes past their age
/// and tops every shape up (which also retries creates that failed).
async fn tick(pool: Weak<Inner>) {
    loop {
        let Some(inner) = pool.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        for (key, (_, shape)) in &inner.shapes {
            let old: Vec<Warm> = {
                let mut s = lock(shape);
                let (old, young): (Vec<Warm>, Vec<Warm>) =
                    s.idle.drain(..).partition(|w| inner.too_old(w));
                s.idle.extend(young);
                old
            };
            for warm in old {
                inner.destroy_later(warm);
            }
            refill(&inner, key);
        }
        inner.publish_size();
        drop(inner);
        tokio::time::sleep(TICK).await;
    }
}

//! Sessions: (tenant, backend, key) → one session, kept in the state store so the same key
//! gets the same session across processes, restarts and nodes. This module holds the
//! record, a per-node cache validated by generation, and the local locks; `acquire`,
//! `release`, `recovery` and `sweep` hold the lease-row state machine; `expiry` (idle
//! timers), `heartbeat` (this node's lease), `reaper` (orphaned containers) and `ended`
//! (why an upgrade ended a session) are the session service's background duties.

mod acquire;
mod archives;
mod ended;
mod expiry;
mod heartbeat;
mod hooks;
mod kept_config;
mod pauses;
mod reaper;
mod recovery;
mod release;
mod sweep;

pub use crate::clock::now_ms;
pub use crate::store::SessionRecord;
pub use acquire::AcquireRequest;
pub use archives::RESTORE_GRACE_MS;
pub use expiry::{ArchiveIdle, BackendOf, IdlePolicy, IdlePolicyOf};
pub use pauses::PauseAsk;
pub use recovery::RecoveryReport;

use crate::error_code::{Code, WharfError};
use crate::runtime::guest_types::SessionView;
use crate::store::{SessionState, StateStore};
use crate::tenant::Tenant;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Who a session belongs to and what it is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionIdentity {
    /// The token (tenant) that made it.
    pub tenant: String,
    /// The backend's name.
    pub backend: String,
    /// The caller's key (thread or worker id).
    pub key: String,
}

impl SessionRecord {
    /// The view handed to the backend.
    pub fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            key: self.key.clone(),
            data: self.data.clone(),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms(),
        }
    }

    /// Identity.
    pub fn identity(&self) -> SessionIdentity {
        SessionIdentity {
            tenant: self.tenant.clone(),
            backend: self.backend.clone(),
            key: self.key.clone(),
        }
    }
}

type LockMap<K> = Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>;

/// Removes `key`'s lock when nobody holds or waits for it.
fn forget_unused_lock<K: std::hash::Hash + Eq>(map: &LockMap<K>, key: &K) {
    if let Ok(mut locks) = map.lock()
        && locks.get(key).is_some_and(|l| Arc::strong_count(l) == 1)
    {
        locks.remove(key);
    }
}

/// The most session records one node caches.
const MAX_CACHED_SESSIONS: usize = 10_000;

/// Records this node has seen, by id and by identity; each is checked against the store's
/// generation before it is trusted.
#[derive(Default)]
struct SessionCache {
    by_id: HashMap<String, SessionRecord>,
    by_identity: HashMap<SessionIdentity, String>,
    /// When each record was last known to be the store's (ms since the epoch).
    checked_ms: HashMap<String, u64>,
}

/// Sessions of this node: the store, a cache validated by generation, and local locks.
pub struct SessionManager {
    store: StateStore,
    node: String,
    lease: Duration,
    cache: Mutex<SessionCache>,
    call_locks: LockMap<String>,
    creation_locks: LockMap<SessionIdentity>,
    /// Each watched session's expiry timer, woken when its expiry moves.
    expiry_timers: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    ended: ended::EndedSessions,
}

fn poisoned() -> WharfError {
    WharfError::internal("session lock poisoned")
}

fn not_found(id: &str) -> WharfError {
    WharfError::session_not_found(format!("no session `{id}`"))
}

impl SessionManager {
    /// Sessions kept in `store`, for node `node`; `lease` bounds how long a creation or
    /// release may hold a row before another node takes over.
    pub fn new(store: StateStore, node: String, lease: Duration) -> Self {
        Self {
            store,
            node,
            lease,
            cache: Mutex::default(),
            call_locks: Mutex::default(),
            creation_locks: Mutex::default(),
            expiry_timers: Mutex::default(),
            ended: Default::default(),
        }
    }

    /// Notes why the sessions `ids` were ended for their callers ([`SessionManager::why_ended`]).
    pub fn note_ended(&self, ids: &[String], why: impl Fn(&str) -> String) {
        self.ended.note(ids, why);
    }

    /// Why session `id` was ended, when something other than its caller ended it.
    pub fn why_ended(&self, id: &str) -> Option<String> {
        self.ended.get(id)
    }

    /// The store.
    pub fn store(&self) -> &StateStore {
        &self.store
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn cache_put(&self, record: &SessionRecord) {
        if let Ok(mut cache) = self.cache.lock() {
            // Bounded: the cache is checked against the store's generation before it is
            // trusted, so an entry let go costs one read of the store, never a wrong answer.
            if cache.by_id.len() >= MAX_CACHED_SESSIONS
                && !cache.by_id.contains_key(&record.id)
                && let Some(evicted) = cache.by_id.keys().next().cloned()
                && let Some(old) = cache.by_id.remove(&evicted)
            {
                cache.by_identity.remove(&old.identity());
                cache.checked_ms.remove(&evicted);
            }
            cache
                .by_identity
                .insert(record.identity(), record.id.clone());
            cache.by_id.insert(record.id.clone(), record.clone());
            cache
                .checked_ms
                .insert(record.id.clone(), crate::clock::now_ms());
        }
    }

    fn cache_find(&self, identity: &SessionIdentity) -> Option<SessionRecord> {
        let cache = self.cache.lock().ok()?;
        cache
            .by_identity
            .get(identity)
            .and_then(|id| cache.by_id.get(id))
            .cloned()
    }

    fn cache_get(&self, id: &str) -> Option<SessionRecord> {
        self.cache.lock().ok()?.by_id.get(id).cloned()
    }

    /// The cached record of `id` if it was known to be the store's at `since_ms` or later.
    fn cache_get_checked(&self, id: &str, since_ms: u64) -> Option<SessionRecord> {
        let cache = self.cache.lock().ok()?;
        let checked = *cache.checked_ms.get(id)?;
        (checked >= since_ms)
            .then(|| cache.by_id.get(id).cloned())
            .flatten()
    }

    fn cache_mark_checked(&self, id: &str) {
        if let Ok(mut cache) = self.cache.lock()
            && let Some(checked) = cache.checked_ms.get_mut(id)
        {
            *checked = crate::clock::now_ms();
        }
    }

    fn cache_drop(&self, id: &str) {
        if let Ok(mut cache) = self.cache.lock()
            && let Some(record) = cache.by_id.remove(id)
        {
            cache.by_identity.remove(&record.identity());
            cache.checked_ms.remove(id);
        }
    }

    /// The lock that serializes calls within one session on this node.
    pub fn call_lock(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<()>>, WharfError> {
        let mut locks = self.call_locks.lock().map_err(|_| poisoned())?;
        Ok(locks.entry(id.to_string()).or_default().clone())
    }

    fn creation_lock(
        &self,
        identity: &SessionIdentity,
    ) -> Result<Arc<tokio::sync::Mutex<()>>, WharfError> {
        let mut locks = self.creation_locks.lock().map_err(|_| poisoned())?;
        Ok(locks.entry(identity.clone()).or_default().clone())
    }

    fn release_creation_lock(&self, identity: &SessionIdentity) {
        forget_unused_lock(&self.creation_locks, identity);
    }

    /// Waits for the session's turn (calls in one session run one at a time) and reads it
    /// fresh under that turn, so the call sees what the previous one left. A session that
    /// cannot be read leaves no lock behind.
    pub async fn begin_call(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<(SessionRecord, tokio::sync::OwnedMutexGuard<()>), WharfError> {
        let turn = self.call_lock(id)?.lock_owned().await;
        match self.get(tenant, id).await {
            Ok(record) => Ok((record, turn)),
            Err(e) => {
                drop(turn);
                forget_unused_lock(&self.call_locks, &id.to_string());
                Err(e)
            }
        }
    }

    /// A ready, paused or archived session of `tenant`, fresh: the cached record when its generation
    /// is still the store's, else re-read. A caller that needs it running resumes it
    /// (`resume_held`) or refuses a paused one ([`SessionManager::get_running`]).
    pub async fn get(&self, tenant: &Tenant, id: &str) -> Result<SessionRecord, WharfError> {
        let visible = |r: &SessionRecord| tenant.sees(&r.tenant);
        if let Some(cached) = self.cache_get(id).filter(visible) {
            match self.store.session_generation(id).await? {
                Some((
                    generation,
                    SessionState::Ready | SessionState::Paused | SessionState::Archived,
                )) if generation == cached.generation => {
                    self.cache_mark_checked(id);
                    return Ok(cached);
                }
                Some(_) => {}
                None => {
                    self.cache_drop(id);
                    return Err(not_found(id));
                }
            }
        }
        let record = self
            .store
            .get_session(id)
            .await?
            .filter(visible)
            .ok_or_else(|| not_found(id))?;
        match record.state {
            SessionState::Ready | SessionState::Paused | SessionState::Archived => {
                self.cache_put(&record);
                Ok(record)
            }
            SessionState::Creating => Err(WharfError::session_not_found(format!(
                "session `{id}` is not initialized yet"
            ))),
            SessionState::Releasing => Err(WharfError::session_not_found(format!(
                "session `{id}` is being released"
            ))),
        }
    }

    /// As [`get`](Self::get), but a record this node knew to be the store's within the last
    /// `fresh` is trusted without reading the store: for previews, where one read per
    /// request costs a tenth of their speed. This node's own changes (pause, release) drop
    /// the record at once; another node's are seen at most `fresh` late.
    pub async fn get_recent(
        &self,
        tenant: &Tenant,
        id: &str,
        fresh: Duration,
    ) -> Result<SessionRecord, WharfError> {
        let fresh_ms = u64::try_from(fresh.as_millis()).unwrap_or(u64::MAX);
        let since = crate::clock::now_ms().saturating_sub(fresh_ms);
        match self.cache_get_checked(id, since) {
            Some(cached) if tenant.sees(&cached.tenant) => Ok(cached),
            _ => self.get(tenant, id).await,
        }
    }

    /// A ready session of `tenant`: a paused or archived one is refused (4090), for what
    /// cannot resume it on the caller's behalf.
    pub async fn get_running(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<SessionRecord, WharfError> {
        let record = self.get(tenant, id).await?;
        record.refuse_if_suspended(format_args!(
            "resume it first (POST /v1/sessions/{id}/resume, or call one of its tools)"
        ))?;
        Ok(record)
    }

    /// Sessions of a tenant, optionally filtered.
    pub async fn list(
        &self,
        tenant: &Tenant,
        backend: Option<&str>,
        key: Option<&str>,
    ) -> Result<Vec<SessionRecord>, WharfError> {
        self.store.list_sessions(tenant.only(), backend, key).await
    }

    /// Extends the idle TTL from now.
    pub async fn refresh(&self, tenant: &Tenant, id: &str) -> Result<SessionRecord, WharfError> {
        self.get_running(tenant, id).await?;
        if !self.store.touch(id, now_ms() as i64).await? {
            return Err(not_found(id));
        }
        self.cache_drop(id);
        self.get(tenant, id).await
    }

    /// After a call: records activity and, when the tool changed it, the new data
    /// (compare-and-set on the generation read before the call; 4090 if another node
    /// changed the session meanwhile).
    pub async fn finish_call(
        &self,
        record: &SessionRecord,
        new_data: Option<Value>,
    ) -> Result<(), WharfError> {
        let now = now_ms() as i64;
        match new_data {
            Some(data) => match self
                .store
                .update_data(&record.id, record.generation, &data, now)
                .await?
            {
                Some(generation) => {
                    let mut updated = record.clone();
                    updated.data = data;
                    updated.generation = generation;
                    updated.last_activity_ms = now as u64;
                    self.cache_put(&updated);
                    Ok(())
                }
                None => {
                    self.cache_drop(&record.id);
                    Err(WharfError::new(
                        Code::Conflict,
                        format!(
                            "session `{}` was changed by another call meanwhile; its new data was not saved",
                            record.id
                        ),
                    ))
                }
            },
            None => {
                // The idle TTL counts from the last activity the store holds: a call within a
                // tenth of the TTL (at most a second) of it writes nothing, so a busy session
                // costs one write a second instead of one per call, and expires at most that
                // much earlier than its last call would say.
                let grain_ms = record.idle_ttl_seconds.saturating_mul(100).min(1000);
                if (now as u64).saturating_sub(record.last_activity_ms) < grain_ms {
                    return Ok(());
                }
                self.store.touch(&record.id, now).await?;
                if let Ok(mut cache) = self.cache.lock()
                    && let Some(cached) = cache.by_id.get_mut(&record.id)
                {
                    cached.last_activity_ms = now as u64;
                }
                Ok(())
            }
        }
    }

    /// Clears `holder`'s claim on a session of `tenant`.
    pub async fn unclaim(
        &self,
        tenant: &Tenant,
        id: &str,
        holder: &str,
    ) -> Result<bool, WharfError> {
        self.get(tenant, id).await?;
        self.store.unclaim(id, holder).await
    }
}

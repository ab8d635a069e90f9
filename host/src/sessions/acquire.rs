//! Acquire by key, idempotent across processes and nodes: a short statement claims the row
//! as `creating` under a lease; `initialize` runs outside any transaction; a compare-and-set
//! makes it `ready`. An existing row is adopted (after `discover` when this node has not
//! seen it), repaired, or replaced when its resources are gone; an expired `creating`
//! lease is taken over.

use super::hooks;
use super::{SessionIdentity, SessionManager, SessionRecord, now_ms};
use crate::error_code::{Code, WharfError};
use crate::runtime::guest_types::Discovery;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::SessionState;
use serde_json::Value;
use std::time::{Duration, Instant};

/// What a caller asks for.
#[derive(Debug, Clone)]
pub struct AcquireRequest {
    /// The caller's tenant.
    pub tenant: String,
    /// The caller's key; the same key gives the same session.
    pub key: String,
    /// Per-session config.
    pub config: Value,
    /// Idle TTL, s (0 = none).
    pub idle_ttl_seconds: u64,
    /// Hard lifetime, s (0 = none).
    pub max_lifetime_seconds: u64,
    /// Owner claim.
    pub owner: Option<String>,
    /// Holder claim to take.
    pub holder: Option<String>,
    /// How long a holder claim lasts.
    pub claim_ttl: Duration,
    /// The tenant's session quota, checked cluster-wide when a row is created.
    pub session_quota: Option<crate::store::RowQuota>,
    /// Whether a warm sandbox may serve the session (not when containers are counted).
    pub warm_allowed: bool,
    /// What the front door checked and resolved for the session's sandbox (its snapshot
    /// image, its volumes: the tenant's own).
    pub sandbox: crate::runtime::backend::SandboxGrant,
}

impl SessionManager {
    /// The session of (tenant, backend, key), created if there is none; `true` when created.
    pub async fn acquire(
        &self,
        backend: &LoadedBackend,
        request: AcquireRequest,
    ) -> Result<(SessionRecord, bool), WharfError> {
        let identity = SessionIdentity {
            tenant: request.tenant.clone(),
            backend: backend.name.to_string(),
            key: request.key.clone(),
        };
        let lock = self.creation_lock(&identity)?;
        let result = {
            let _local = lock.lock().await;
            self.acquire_locked(backend, &identity, &request).await
        };
        drop(lock);
        self.release_creation_lock(&identity);
        let (record, created) = result?;
        if let Some(holder) = &request.holder {
            let until = (now_ms() + request.claim_ttl.as_millis() as u64) as i64;
            if !self
                .store
                .claim(
                    &record.id,
                    request.owner.as_deref(),
                    holder,
                    until,
                    now_ms() as i64,
                )
                .await?
            {
                return Err(WharfError::new(
                    Code::Conflict,
                    format!("session `{}` is held by another holder", record.id),
                ));
            }
        }
        Ok((record, created))
    }

    async fn acquire_locked(
        &self,
        backend: &LoadedBackend,
        identity: &SessionIdentity,
        request: &AcquireRequest,
    ) -> Result<(SessionRecord, bool), WharfError> {
        // Fast path: this node has the session cached; one cheap read confirms it is current.
        if let Some(cached) = self.cache_find(identity)
            && request
                .owner
                .as_ref()
                .is_none_or(|mine| cached.owner.as_ref().is_none_or(|theirs| theirs == mine))
            && matches!(self.store.session_generation(&cached.id).await?, Some((g, SessionState::Ready)) if g == cached.generation)
        {
            return Ok((cached, false));
        }
        let give_up = Instant::now() + self.lease * 2;
        let mut wait = Duration::from_millis(20);
        loop {
            let now = now_ms();
            let fresh = SessionRecord {
                id: format!("ses_{}", uuid::Uuid::new_v4().simple()),
                tenant: identity.tenant.clone(),
                backend: identity.backend.clone(),
                key: identity.key.clone(),
                state: SessionState::Creating,
                data: Value::Null,
                owner: request.owner.clone(),
                holder: None,
                holder_until_ms: 0,
                plugin_version: backend.description.version.clone(),
                node: self.node.clone(),
                lease_until_ms: now + self.lease.as_millis() as u64,
                created_at_ms: now,
                last_activity_ms: now,
                idle_ttl_seconds: request.idle_ttl_seconds,
                max_expires_at_ms: (request.max_lifetime_seconds > 0)
                    .then(|| crate::bounded::after_seconds(now, request.max_lifetime_seconds)),
                generation: 0,
                paused_until_ms: None,
                archive: None,
            };
            let inserted = match &request.session_quota {
                Some(quota) => {
                    let node_until = (now + self.lease.as_millis() as u64) as i64;
                    self.store
                        .insert_creating_within(&fresh, quota, &self.node, node_until)
                        .await?
                }
                None => self.store.insert_creating(&fresh).await?,
            };
            if inserted {
                return self
                    .initialize(backend, fresh, request)
                    .await
                    .map(|r| (r, true));
            }
            let Some(row) = self
                .store
                .find_session(&identity.tenant, &identity.backend, &identity.key)
                .await?
            else {
                continue;
            };
            match row.state {
                SessionState::Ready | SessionState::Paused | SessionState::Archived => {
                    if let (Some(mine), Some(theirs)) = (&request.owner, &row.owner)
                        && mine != theirs
                    {
                        return Err(WharfError::new(
                            Code::Conflict,
                            format!("session `{}` belongs to another owner", row.id),
                        ));
                    }
                    // A paused or archived session is its key's session still: the
                    // caller's next call resumes it (a frozen sandbox would not pass
                    // `discover`, and an archived one has none).
                    if row.state != SessionState::Ready {
                        return Ok((row, false));
                    }
                    if self
                        .cache_get(&row.id)
                        .is_some_and(|c| c.generation == row.generation)
                    {
                        return Ok((row, false));
                    }
                    match self.adopt(backend, row).await? {
                        Some(adopted) => return Ok((adopted, false)),
                        None => continue,
                    }
                }
                SessionState::Creating | SessionState::Releasing if row.lease_until_ms < now => {
                    let lease_until = (now + self.lease.as_millis() as u64) as i64;
                    if self
                        .store
                        .take_over(&row.id, row.state, &self.node, lease_until, now as i64)
                        .await?
                    {
                        let mut taken = row.clone();
                        taken.node = self.node.clone();
                        taken.generation += 1;
                        if row.state == SessionState::Creating {
                            tracing::info!(session = %row.id, from = %row.node, "taking over an expired creation");
                            return self
                                .initialize(backend, taken, request)
                                .await
                                .map(|r| (r, true));
                        }
                        self.finish_release(backend, &taken).await?;
                    }
                }
                _ => {
                    if Instant::now() > give_up {
                        return Err(WharfError::new(
                            Code::Conflict,
                            format!("session `{}` is busy on node `{}`", row.id, row.node),
                        ));
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    /// Runs the backend's initialize for a `creating` row this node holds, then marks it
    /// ready. On failure the row is removed (the backend cleans up what it made).
    async fn initialize(
        &self,
        backend: &LoadedBackend,
        row: SessionRecord,
        request: &AcquireRequest,
    ) -> Result<SessionRecord, WharfError> {
        let data = match self
            .holding_lease(
                &row.id,
                hooks::initialize(
                    backend,
                    &row,
                    &request.config,
                    request.max_lifetime_seconds,
                    // A sandbox from a snapshot or with volumes is made for its session,
                    // never taken warm.
                    request.warm_allowed && request.sandbox.is_plain(),
                    request.sandbox.clone(),
                ),
            )
            .await
        {
            Ok(data) => data,
            Err(e) => {
                self.store.delete_session(&row.id).await?;
                return Err(e);
            }
        };
        // Before the row is ready: a fork must never find a session without its config.
        if let Err(e) = self.keep_config(backend, &row.id, &request.config).await {
            let mut made = row.clone();
            made.data = data;
            let _ = hooks::cleanup(backend, &made).await;
            self.store.delete_session(&row.id).await?;
            return Err(e);
        }
        if !self
            .store
            .mark_ready(&row.id, &self.node, &data, now_ms() as i64)
            .await?
        {
            // Our lease ran out and another node took the row: undo what we made.
            let mut made = row.clone();
            made.data = data;
            let _ = hooks::cleanup(backend, &made).await;
            return Err(WharfError::new(
                Code::Conflict,
                format!("lost the creation lease of session `{}`", row.id),
            ));
        }
        self.reload(&row.id, "the new session vanished").await
    }

    /// The stored row `id` as it is now, put in the cache; `vanished` is the 4004's
    /// message when it is gone.
    async fn reload(&self, id: &str, vanished: &str) -> Result<SessionRecord, WharfError> {
        let record = self
            .store
            .get_session(id)
            .await?
            .ok_or_else(|| WharfError::session_not_found(vanished))?;
        self.cache_put(&record);
        Ok(record)
    }

    /// Adopts a ready row this node has not seen: `discover` decides whether it is usable
    /// as stored, usable with repaired data, or gone (then the row is removed and `None`).
    pub(crate) async fn adopt(
        &self,
        backend: &LoadedBackend,
        row: SessionRecord,
    ) -> Result<Option<SessionRecord>, WharfError> {
        match hooks::discover(backend, &row).await? {
            Discovery::Alive => {
                self.cache_put(&row);
                Ok(Some(row))
            }
            Discovery::AliveWith(data) => match self
                .store
                .update_data(&row.id, row.generation, &data, now_ms() as i64)
                .await?
            {
                Some(_) => Ok(Some(self.reload(&row.id, "vanished").await?)),
                None => Ok(None),
            },
            Discovery::Gone => {
                tracing::info!(session = %row.id, "session resources are gone; removing the stale record");
                self.store
                    .delete_session_at(&row.id, row.generation)
                    .await?;
                self.cache_drop(&row.id);
                Ok(None)
            }
        }
    }
}

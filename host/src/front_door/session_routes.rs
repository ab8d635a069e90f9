//! The front door's session operations: acquire, get, list, refresh, release, claims,
//! file-transfer access, idle expiry timers, recovery at start-up, node heartbeats and the
//! sweeper (abandoned session rows, orphaned containers).

use super::Wharf;
use crate::bounded::TtlSeconds;
use crate::error_code::{Code, WharfError};
use crate::runtime::loaded_backend::LoadedBackend;
use crate::sessions::{AcquireRequest, RecoveryReport, SessionRecord, now_ms};
use crate::tenant::Tenant;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A request to create (or find again) a session.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(example = serde_json::json!({"backend": "scratchpad", "key": "thread-1"}))]
pub struct SessionRequest {
    /// Backend name.
    pub backend: String,
    /// Caller's key; the same key gives the same session.
    #[serde(default)]
    pub key: Option<String>,
    /// Per-session config for `initialize`.
    #[serde(default)]
    pub config: Option<Value>,
    /// Idle TTL in s (0 = none, at most ten years; more is refused with 4004); defaults to
    /// the backend's.
    #[serde(default)]
    pub ttl_seconds: Option<TtlSeconds>,
    /// Owner claim.
    #[serde(default)]
    pub owner: Option<String>,
    /// Holder claim to take (refused with 4090 while another live holder holds it).
    #[serde(default)]
    pub holder: Option<String>,
}

/// How long a holder claim lasts unless renewed.
const CLAIM_TTL: Duration = Duration::from_secs(300);
/// Longest sleep of an expiry timer before it reads its session again.
const EXPIRY_RECHECK: Duration = Duration::from_secs(24 * 3600);

impl Wharf {
    /// Acquires the session of (tenant, backend, key): the existing one, or a new one.
    pub async fn create_session(
        &self,
        tenant: &str,
        request: SessionRequest,
    ) -> Result<(SessionRecord, bool), WharfError> {
        let backend = self.requested_backend(&request.backend)?;
        let config = request.config.clone().unwrap_or(serde_json::Value::Null);
        if let Some(schema) = &backend.description.session_config_schema
            && !config.is_null()
        {
            crate::schema_validation::ArgsValidator::new(schema)
                .map_err(|e| {
                    WharfError::internal(format!(
                        "the backend's session config schema is invalid: {e:#}"
                    ))
                })?
                .validate(&config)?;
        }
        let lifetimes = self
            .backend_config(&backend.name)
            .map(|c| c.sessions)
            .unwrap_or_default();
        let quota = self.services.quotas.limits(tenant, Some(&*backend.name));
        let (idle_ttl_seconds, max_lifetime_seconds) = quota.session_lifetimes(
            request.ttl_seconds.map(TtlSeconds::get),
            TtlSeconds::saturating(lifetimes.idle_ttl_seconds).get(),
            lifetimes.max_lifetime_seconds,
        );
        let acquire = AcquireRequest {
            tenant: tenant.to_string(),
            key: request
                .key
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            config,
            idle_ttl_seconds,
            max_lifetime_seconds,
            session_quota: quota.sessions.map(|(limit, scope)| crate::store::RowQuota {
                limit,
                backend: (scope == crate::quotas::Scope::Backend).then(|| backend.name.to_string()),
            }),
            warm_allowed: quota.containers.is_none(),
            owner: request.owner.clone(),
            holder: request.holder.clone(),
            claim_ttl: CLAIM_TTL,
        };
        let (record, created) =
            crate::quotas::as_tenant(tenant, self.sessions.acquire(&backend, acquire))
                .await
                .inspect_err(|e| self.audit_quota_refusal(tenant, &backend.name, e))?;
        self.watch_expiry(record.id.clone());
        Ok((record, created))
    }

    fn audit_quota_refusal(&self, tenant: &str, backend: &str, e: &WharfError) {
        let Some(quota) = e
            .data
            .as_ref()
            .and_then(|d| d.get("quota"))
            .and_then(Value::as_str)
        else {
            return;
        };
        self.metrics.tenants.record_refusal(tenant, quota);
        tracing::info!(
            target: "wharf::audit",
            event = "quota_refused",
            tenant,
            backend,
            quota,
            code = e.code.as_u32(),
        );
    }

    /// A session of `tenant`.
    pub async fn session(&self, tenant: &Tenant, id: &str) -> Result<SessionRecord, WharfError> {
        self.sessions.get(tenant, id).await
    }

    /// Sessions of `tenant`.
    pub async fn sessions(
        &self,
        tenant: &Tenant,
        backend: Option<&str>,
        key: Option<&str>,
    ) -> Result<Vec<SessionRecord>, WharfError> {
        self.sessions.list(tenant, backend, key).await
    }

    /// Extends a session's idle TTL from now.
    pub async fn refresh_session(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<SessionRecord, WharfError> {
        self.sessions.refresh(tenant, id).await
    }

    /// Clears `holder`'s claim on a session; other holders' claims are untouched.
    pub async fn release_claim(
        &self,
        tenant: &Tenant,
        id: &str,
        holder: &str,
    ) -> Result<bool, WharfError> {
        self.sessions.unclaim(tenant, id, holder).await
    }

    /// Releases a session (cleanup, then forget). Unknown ids succeed: delete is idempotent.
    pub async fn delete_session(&self, tenant: &Tenant, id: &str) -> Result<bool, WharfError> {
        let record = match self.sessions.get(tenant, id).await {
            Ok(record) => record,
            Err(e) if e.code == Code::SessionNotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let backend = self.backend(&record.backend).ok();
        self.sessions
            .release(backend.as_deref(), &record, None)
            .await
    }

    /// A provider session of `tenant` with its backend, and the session's call lock held
    /// (file transfers run one at a time with the session's calls).
    pub async fn sandbox_session(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<
        (
            Arc<LoadedBackend>,
            SessionRecord,
            tokio::sync::OwnedMutexGuard<()>,
        ),
        WharfError,
    > {
        let (record, guard) = self.sessions.begin_call(tenant, id).await?;
        let backend = self.backend(&record.backend)?;
        if backend.behaviour().files().is_none() {
            return Err(WharfError::invalid_request(format!(
                "session `{id}` belongs to `{}`, which is not a sandbox provider",
                record.backend
            )));
        }
        self.sessions.finish_call(&record, None).await?;
        Ok((backend, record, guard))
    }

    /// Idle expiry: one timer per session, re-checking the store before acting (another
    /// node may have used the session meanwhile).
    pub(super) fn watch_expiry(&self, id: String) {
        let Some(wharf) = self.myself.upgrade() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&wharf);
        drop(wharf);
        handle.spawn(async move {
            loop {
                let Some(wharf) = weak.upgrade() else { return };
                let record = match wharf.sessions.store().get_session(&id).await {
                    Ok(Some(record)) => record,
                    Ok(None) => return,
                    Err(_) => {
                        drop(wharf);
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        continue;
                    }
                };
                let Some(expires) = record.expires_at_ms() else { return };
                let now = now_ms();
                if now >= expires {
                    let backend = wharf.backend(&record.backend).ok();
                    match wharf.sessions.release(backend.as_deref(), &record, Some(record.last_activity_ms)).await {
                        Ok(true) => tracing::info!(session = %id, "session expired and was released"),
                        Ok(false) => continue,
                        Err(e) => tracing::warn!(session = %id, "releasing an expired session failed: {}", e.message),
                    }
                    return;
                }
                drop(wharf);
                // Woken at least daily: a far expiry (or a saturated "never") is re-read
                // rather than slept on.
                let wait = Duration::from_millis(expires.saturating_sub(now)).min(EXPIRY_RECHECK);
                tokio::time::sleep(wait).await;
            }
        });
    }

    /// Recovers the stored sessions of every loaded backend (start-up after a crash or
    /// restart) and arms their expiry timers.
    pub async fn recover_sessions(&self) -> Vec<(String, RecoveryReport)> {
        let mut reports = Vec::new();
        for backend in self.backends() {
            match self.sessions.recover(&backend).await {
                Ok((report, adopted)) => {
                    for record in adopted {
                        self.watch_expiry(record.id);
                    }
                    if !report.adopted.is_empty()
                        || !report.removed.is_empty()
                        || !report.skipped.is_empty()
                    {
                        tracing::info!(backend = %backend.name, adopted = report.adopted.len(), removed = report.removed.len(), skipped = report.skipped.len(), "sessions recovered");
                    }
                    reports.push((backend.name.to_string(), report));
                }
                Err(e) => {
                    tracing::warn!(backend = %backend.name, "session recovery failed: {}", e.message)
                }
            }
        }
        reports
    }

    /// Removes containers labelled by Wharf whose session has no record, when the node that
    /// made them is this one or a node of this store whose lease ran out. A container whose session is still
    /// `creating` has a record, so it is never reaped. Returns the removed ids.
    pub async fn reap_orphans(&self) -> Result<Vec<String>, WharfError> {
        let Some(engine) = self.services.container_engine() else {
            return Ok(Vec::new());
        };
        let containers = engine.list_all().await.map_err(WharfError::from)?;
        let nodes = self.sessions.store().known_nodes().await?;
        let now = now_ms() as i64;
        let mut removed = Vec::new();
        for c in containers {
            let Some(session) = c.session.clone() else {
                continue;
            };
            let node = c
                .label(crate::docker::LABEL_NODE)
                .unwrap_or_default()
                .to_string();
            // Only this node's containers, or those of a node of this store whose lease ran
            // out: a node the store never heard of belongs to another deployment.
            let dead_node_of_ours = nodes
                .get(&node)
                .is_some_and(|lease_until| *lease_until < now);
            if node != self.node_id && !dead_node_of_ours {
                continue;
            }
            let store = self.sessions.store();
            // A warm sandbox's containers carry its pool id until the sweeper ends its row.
            if store.get_session(&session).await?.is_some() || store.warm_exists(&session).await? {
                continue;
            }
            let owner = crate::engines::Owner {
                backend: c.backend.clone(),
                session: Some(session.clone()),
            };
            match engine.remove(&owner, &c.id).await {
                Ok(()) => {
                    tracing::info!(container = %c.id, session = %session, "reaped an orphaned container");
                    removed.push(c.id);
                }
                Err(e) => tracing::warn!(container = %c.id, "reaping failed: {e}"),
            }
        }
        Ok(removed)
    }

    /// Renews this node's lease in the store now and every third of the lease.
    pub(super) fn start_heartbeat(&self) {
        self.every(self.server.lease() / 3, async |wharf: Arc<Wharf>| {
            let now = now_ms();
            let until = (now + wharf.server.lease().as_millis() as u64) as i64;
            let store = wharf.sessions.store();
            if let Err(e) = store.heartbeat(&wharf.node_id, until, now as i64).await {
                tracing::warn!("node heartbeat failed: {}", e.message);
            }
        });
    }

    /// Finishes the abandoned `creating` and `releasing` rows of the loaded backends
    /// (lease run out, or held by this node's earlier incarnation): destroys what is
    /// labelled with each session, runs its backend's cleanup and deletes the row; then
    /// the stale warm sandboxes (`sandbox_toolset::warm_sweep`). Returns the ids of the
    /// rows deleted.
    pub async fn sweep_abandoned(&self) -> Result<Vec<String>, WharfError> {
        let mut swept = self
            .sessions
            .sweep(
                |name| self.backend(name).ok(),
                self.services.container_engine(),
            )
            .await?;
        // After the sessions: a warm sandbox whose taker was just swept is stale now.
        swept.extend(
            crate::sandbox_toolset::warm_sweep::sweep(
                self.sessions.store(),
                &self.node_id,
                |name| self.backend(name).ok(),
                self.services.container_engine(),
            )
            .await?,
        );
        Ok(swept)
    }

    /// Sweeps abandoned rows, then reaps orphaned containers (a create that was in flight
    /// when a node died may land after its row was swept), now and every sweep period.
    pub fn start_sweeper(&self) {
        self.every(self.server.sweep_interval(), async |wharf: Arc<Wharf>| {
            if let Err(e) = wharf.sweep_abandoned().await {
                tracing::debug!("sweeping skipped: {}", e.message);
            }
            if let Err(e) = wharf.reap_orphans().await {
                tracing::debug!("orphan reaping skipped: {}", e.message);
            }
        });
    }

    /// Runs `tick` now and then every `period` for as long as the host lives (the task
    /// holds it only while a tick runs).
    fn every<Tick>(&self, period: Duration, tick: impl Fn(Arc<Wharf>) -> Tick + Send + 'static)
    where
        Tick: std::future::Future<Output = ()> + Send,
    {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = self.myself.clone();
        handle.spawn(async move {
            loop {
                let Some(wharf) = weak.upgrade() else { return };
                tick(wharf).await;
                tokio::time::sleep(period).await;
            }
        });
    }
}

//! The front door's session operations: acquire, get, list, refresh, release, claims,
//! file-transfer access, recovery at start-up and the sweeper (abandoned session rows,
//! orphaned containers). Expiry timers, the heartbeat and the reaper are the session
//! service's (`sessions/expiry`, `heartbeat`, `reaper`); this file hands them the registry.

use super::Wharf;
use crate::bounded::TtlSeconds;
use crate::error_code::{Code, WharfError};
use crate::runtime::loaded_backend::LoadedBackend;
use crate::sessions::{AcquireRequest, RecoveryReport, SessionRecord};
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
    /// A snapshot of the caller's (`POST /v1/sessions/{id}/snapshots`) to start the
    /// session's sandbox from: its files, not its memory or processes. Only a new session
    /// starts from it; an existing session of the key is returned as it is.
    #[serde(default)]
    pub from_snapshot: Option<String>,
}

/// How long a holder claim lasts unless renewed.
const CLAIM_TTL: Duration = Duration::from_secs(300);

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
        let from_image = match &request.from_snapshot {
            Some(id) => Some(
                self.snapshot_image(&Tenant::own(tenant), id, &backend.name)
                    .await?,
            ),
            None => None,
        };
        let volumes = self.session_volumes(tenant, &backend, &config).await?;
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
            sandbox: crate::runtime::backend::SandboxGrant {
                from_image,
                volumes,
            },
            owner: request.owner.clone(),
            holder: request.holder.clone(),
            claim_ttl: CLAIM_TTL,
        };
        let (record, created) = self
            .sessions
            .acquire(&backend, acquire)
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
        let released = self
            .sessions
            .release(backend.as_deref(), &record, None)
            .await?;
        self.drop_archive(&record).await;
        Ok(released)
    }

    /// Whether `id` is a session of `tenant` whose backend has a sandbox to move files in
    /// and out of (4007, or 4002 naming the backend), without taking its turn.
    pub async fn sandbox_session_exists(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<(), WharfError> {
        let record = self.session(tenant, id).await?;
        let backend = self.backend(&record.backend)?;
        if backend.behaviour().files().is_none() {
            return Err(WharfError::invalid_request(format!(
                "session `{id}` belongs to `{}`, which is not a sandbox provider",
                record.backend
            )));
        }
        Ok(())
    }

    /// A provider session of `tenant` with its backend, and the session's call lock held
    /// (file transfers run one at a time with the session's calls).
    pub(super) async fn sandbox_session(
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
        let (record, guard, _) = self.begin_live_call(tenant, id, None).await?;
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

    /// Idle expiry: one timer per session (`sessions/expiry`), releasing through the
    /// backend the registry has then.
    pub(super) fn watch_expiry(&self, id: String) {
        let registry = Arc::downgrade(&self.registry);
        let configs = registry.clone();
        let quotas = self.services.quotas.clone();
        let wharf = self.myself.clone();
        let archive: crate::sessions::ArchiveIdle = Arc::new(move |id: String, idle_since| {
            let wharf = wharf.clone();
            Box::pin(async move {
                match wharf.upgrade() {
                    Some(wharf) => wharf.archive_idle(&id, idle_since).await,
                    None => Err(WharfError::new(
                        Code::BackendUnavailable,
                        "the host is stopping",
                    )),
                }
            })
        });
        self.sessions.watch_expiry(
            id,
            Arc::new(move |name: &str| registry.upgrade()?.backend(name).ok()),
            Arc::new(move |record: &SessionRecord| {
                let limits = configs
                    .upgrade()
                    .and_then(|r| r.backend_config(&record.backend))
                    .map(|c| c.sessions)
                    .unwrap_or_default();
                let pause_cap = super::session_pauses::pause_cap(&quotas, &limits, record);
                crate::sessions::IdlePolicy { limits, pause_cap }
            }),
            archive,
        );
    }

    /// Recovers the stored sessions of every loaded backend (start-up after a crash or
    /// restart) and arms their expiry timers.
    pub async fn recover_sessions(&self) -> Vec<(String, RecoveryReport)> {
        let mut reports = Vec::new();
        for backend in self.registry.backends() {
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
        self.sessions
            .reap_orphans(self.services.container_engine())
            .await
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
        if self.services.container_engine().is_some() {
            match self.sweep_snapshots().await {
                Ok(snapshots) => swept.extend(snapshots),
                Err(e) => tracing::debug!("sweeping snapshots skipped: {}", e.message),
            }
            match self.sweep_volumes().await {
                Ok(volumes) => swept.extend(volumes),
                Err(e) => tracing::debug!("sweeping volumes skipped: {}", e.message),
            }
        }
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
    /// when a node died may land after its row was swept), now and every sweep period, for
    /// as long as the host lives (the task holds it only while a sweep runs). The sweep
    /// needs the registry's backends and the warm pools, so it is the front door's.
    pub fn start_sweeper(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = self.myself.clone();
        let period = self.server.sweep_interval();
        handle.spawn(async move {
            loop {
                let Some(wharf) = weak.upgrade() else { return };
                if let Err(e) = wharf.sweep_abandoned().await {
                    tracing::debug!("sweeping skipped: {}", e.message);
                }
                if let Err(e) = wharf.reap_orphans().await {
                    tracing::debug!("orphan reaping skipped: {}", e.message);
                }
                drop(wharf);
                tokio::time::sleep(period).await;
            }
        });
    }
}

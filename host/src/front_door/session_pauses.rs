//! The front door's pause and resume: a session's sandbox frozen on request, or when its
//! backend's `on_idle = "pause"` says so (`sessions/expiry`), and thawed on request or by
//! the next call that needs it running (`begin_live_call`), whose reply says it was.

use super::Wharf;
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::sessions::{PauseAsk, SessionRecord};
use crate::tenant::Tenant;
use std::sync::Arc;

impl Wharf {
    /// Pauses a session of `tenant` (idempotent): 4030 when its backend cannot pause.
    pub async fn pause_session(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<SessionRecord, WharfError> {
        let record = self.sessions.get(tenant, id).await?;
        let backend = self.backend(&record.backend)?;
        let limits = self
            .backend_config(&record.backend)
            .map(|c| c.sessions)
            .unwrap_or_default();
        let cap = pause_cap(&self.services.quotas, &limits, &record);
        let paused = self
            .sessions
            .pause(
                &backend,
                tenant,
                id,
                limits.paused_ttl_seconds,
                PauseAsk::Now,
                cap,
            )
            .await
            .inspect_err(|e| {
                if e.code == crate::error_code::Code::Forbidden {
                    let quota_tenant = super::quota_tenant_of(&record.tenant);
                    self.metrics
                        .tenants
                        .record_refusal(quota_tenant, "paused_sessions");
                }
            })?;
        tracing::info!(target: "wharf::audit", event = "session_pause", tenant = tenant.only().unwrap_or("-"), backend = %record.backend, session = %id);
        Ok(paused)
    }

    /// Pauses session `id` of `backend` once its turn is free (the `pause_sandbox` tool:
    /// the call that asks holds the turn). 4030 at once when its backend cannot pause; a
    /// refusal then (a cap reached, the session gone) is logged, and the session keeps
    /// running.
    pub(super) fn pause_when_free(&self, backend: &str, id: &str) -> Result<(), WharfError> {
        let backend = self.backend(backend)?;
        if !backend.behaviour().suspendable() {
            return Err(crate::runtime::backend::no_suspension(Some(&backend.name)));
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return Err(WharfError::internal("no runtime to pause on"));
        };
        let wharf = self.myself.clone();
        let id = id.to_string();
        handle.spawn(async move {
            let Some(wharf) = wharf.upgrade() else { return };
            if let Err(e) = wharf.pause_session(&Tenant::Every, &id).await {
                tracing::info!(session = %id, "a pause the session asked for was refused: {}", e.message);
            }
        });
        Ok(())
    }

    /// Resumes a paused session of `tenant`, or restores an archived one (idempotent); the
    /// record, and whether it was paused or archived.
    pub async fn resume_session(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<(SessionRecord, bool), WharfError> {
        let (record, _turn, resumed) = self.begin_live_call(tenant, id, None).await?;
        Ok((record, resumed))
    }

    /// Takes a session's turn and has it running: a paused session is resumed first (as
    /// E2B's auto-resume does), an archived one restored from its snapshot. The record, the
    /// turn, and whether it was resumed.
    pub(super) async fn begin_live_call(
        &self,
        tenant: &Tenant,
        id: &str,
        backend: Option<&Arc<LoadedBackend>>,
    ) -> Result<(SessionRecord, tokio::sync::OwnedMutexGuard<()>, bool), WharfError> {
        let (record, turn) = self.sessions.begin_call(tenant, id).await?;
        let state = record.state;
        if !matches!(
            state,
            crate::session_record::SessionState::Paused
                | crate::session_record::SessionState::Archived
        ) {
            return Ok((record, turn, false));
        }
        let owned;
        let backend = match backend {
            Some(b) if *b.name == *record.backend => b,
            // Another backend's session: the caller refuses it as it is.
            Some(_) => return Ok((record, turn, false)),
            None => {
                owned = self.backend(&record.backend)?;
                &owned
            }
        };
        self.check_running_quota(&record).await?;
        let record = if state == crate::session_record::SessionState::Archived {
            self.restore_held(backend, record).await?
        } else {
            let (record, _) = self.sessions.resume_held(backend, record).await?;
            tracing::info!(target: "wharf::audit", event = "session_resume", tenant = tenant.only().unwrap_or("-"), backend = %record.backend, session = %id);
            record
        };
        // Its idle TTL runs again: this node's timer (a new one, when the session was
        // paused or archived by another node) reads it afresh.
        self.watch_expiry(record.id.clone());
        Ok((record, turn, true))
    }
}

impl Wharf {
    /// 4030 when resuming `record` would take its tenant past its `containers` quota: a
    /// paused container (or an archived session's, which has none) does not count against
    /// it, so a resume is checked as a create is.
    async fn check_running_quota(&self, record: &SessionRecord) -> Result<(), WharfError> {
        let tenant = super::quota_tenant_of(&record.tenant);
        let limits = self.services.quotas.limits(tenant, Some(&record.backend));
        let (Some((limit, scope)), Some(ledger)) =
            (limits.containers, self.services.create_turns.ledger())
        else {
            return Ok(());
        };
        let Some(engine) = self.services.container_engine() else {
            return Ok(());
        };
        let backend = (scope == crate::quotas::Scope::Backend).then_some(record.backend.as_str());
        let running = crate::imports::container_quota::running_containers(
            engine,
            ledger,
            tenant,
            backend,
            Some(&record.id),
        )
        .await?;
        if running < limit {
            return Ok(());
        }
        self.metrics.tenants.record_refusal(tenant, "containers");
        let mut e = WharfError::new(
            crate::error_code::Code::Forbidden,
            format!(
                "session `{}` cannot be resumed: tenant `{tenant}` runs {running} containers, its quota; pause or release a session first",
                record.id
            ),
        );
        e.data =
            Some(serde_json::json!({"quota": "containers", "limit": limit, "in_use": running}));
        Err(e)
    }
}

/// The cap a pause of `record` is under: its backend's `max_paused` and its tenant's
/// `paused_sessions`.
pub(super) fn pause_cap(
    quotas: &crate::quotas::Quotas,
    limits: &crate::config::SessionLimits,
    record: &SessionRecord,
) -> crate::store::PauseCap {
    state_cap(quotas, record, limits.max_paused, |q| q.paused_sessions)
}

/// The cap an archive of `record` is under: its backend's `max_archived` and its tenant's
/// `archived_sessions`.
pub(super) fn archive_cap(
    quotas: &crate::quotas::Quotas,
    limits: &crate::config::SessionLimits,
    record: &SessionRecord,
) -> crate::store::PauseCap {
    state_cap(quotas, record, limits.max_archived, |q| q.archived_sessions)
}

/// Its backend's `backend_limit` and the tenant quota `tenant_limit` picks, for `record`.
fn state_cap(
    quotas: &crate::quotas::Quotas,
    record: &SessionRecord,
    backend_limit: u64,
    tenant_limit: impl Fn(&crate::quotas::Effective) -> Option<u64>,
) -> crate::store::PauseCap {
    let tenant = quotas.limits(
        super::quota_tenant_of(&record.tenant),
        Some(&record.backend),
    );
    crate::store::PauseCap {
        backend: Some(backend_limit),
        tenant: tenant_limit(&tenant),
    }
}

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
        let ttl = self
            .backend_config(&record.backend)
            .map(|c| c.sessions.paused_ttl_seconds)
            .unwrap_or_default();
        let paused = self
            .sessions
            .pause(&backend, tenant, id, ttl, PauseAsk::Now)
            .await?;
        tracing::info!(target: "wharf::audit", event = "session_pause", tenant = tenant.only().unwrap_or("-"), backend = %record.backend, session = %id);
        Ok(paused)
    }

    /// Resumes a session of `tenant` (idempotent); the record, and whether it was paused.
    pub async fn resume_session(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<(SessionRecord, bool), WharfError> {
        let record = self.sessions.get(tenant, id).await?;
        let backend = self.backend(&record.backend)?;
        let (record, resumed) = self.sessions.resume(&backend, tenant, id).await?;
        if resumed {
            tracing::info!(target: "wharf::audit", event = "session_resume", tenant = tenant.only().unwrap_or("-"), backend = %record.backend, session = %id);
        }
        Ok((record, resumed))
    }

    /// Takes a session's turn and has it running: a paused session is resumed first
    /// (as E2B's auto-resume does). The record, the turn, and whether it was resumed.
    pub(super) async fn begin_live_call(
        &self,
        tenant: &Tenant,
        id: &str,
        backend: Option<&Arc<LoadedBackend>>,
    ) -> Result<(SessionRecord, tokio::sync::OwnedMutexGuard<()>, bool), WharfError> {
        let (record, turn) = self.sessions.begin_call(tenant, id).await?;
        if record.state != crate::session_record::SessionState::Paused {
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
        let (record, resumed) = self.sessions.resume_held(backend, record).await?;
        if resumed {
            tracing::info!(target: "wharf::audit", event = "session_resume", tenant = tenant.only().unwrap_or("-"), backend = %record.backend, session = %id, by = "call");
        }
        Ok((record, turn, resumed))
    }
}

//! Pausing and resuming a session: the row goes `ready` ⇄ `paused` (a compare-and-set,
//! `store/session_pauses`) and the backend freezes or thaws the session's sandbox
//! (`Backend::suspend`), both under the session's turn on this node.
//!
//! Order, so that a crash between the two steps loses nothing: a pause writes the row
//! first, then freezes; a resume thaws first, then writes the row. Either way a row that
//! says `ready` has a running sandbox, and a row that says `paused` is made true by
//! asking again (both engine steps are idempotent): recovery at start-up re-pauses every
//! paused row's sandbox, and the next call or resume thaws it.

use super::{SessionManager, SessionRecord, not_found, now_ms};
use crate::error_code::{Code, WharfError};
use crate::runtime::backend::no_suspension;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::{PauseCap, SessionState};
use crate::tenant::Tenant;

/// How a pause decides which session may be paused.
#[derive(Debug, Clone, Copy)]
pub enum PauseAsk {
    /// A caller asked: pause it whatever its last activity.
    Now,
    /// The idle timer: only if nothing used the session since this activity (ms).
    IdleSince(u64),
}

/// The refusal of a pause or an archive past a cap (4030, `data.quota =
/// "paused_sessions"` or `"archived_sessions"`): `verb` is `paused` or `archived`.
pub(super) fn cap_reached(record: &SessionRecord, cap: PauseCap, verb: &str) -> WharfError {
    let mut e = WharfError::new(
        Code::Forbidden,
        format!(
            "session `{}` cannot be {verb}: backend `{}` keeps at most {} {verb} sessions and tenant `{}` at most {}; resume or delete a {verb} session first",
            record.id,
            record.backend,
            cap.backend
                .map_or("any number of".to_string(), |n| n.to_string()),
            record.tenant,
            cap.tenant
                .map_or("any number".to_string(), |n| n.to_string()),
        ),
    );
    e.data = Some(serde_json::json!({
        "quota": format!("{verb}_sessions"),
        "backend_limit": cap.backend,
        "tenant_limit": cap.tenant,
    }));
    e
}

impl SessionManager {
    /// Pauses a session of `tenant` (a paused one is returned as it is); it ends
    /// `paused_ttl_seconds` after the pause unless resumed (0: never). Refused with 4030
    /// when its backend cannot pause or `cap` is reached (`data.quota =
    /// "paused_sessions"`), 4090 when another node changed it meanwhile.
    pub async fn pause(
        &self,
        backend: &LoadedBackend,
        tenant: &Tenant,
        id: &str,
        paused_ttl_seconds: u64,
        ask: PauseAsk,
        cap: PauseCap,
    ) -> Result<SessionRecord, WharfError> {
        let (record, _turn) = self.begin_call(tenant, id).await?;
        check_backend(backend, &record)?;
        if record.state == SessionState::Paused {
            return Ok(record);
        }
        if !backend.behaviour().suspendable() {
            return Err(no_suspension(Some(&backend.name)));
        }
        if let PauseAsk::IdleSince(activity) = ask
            && record.last_activity_ms > activity
        {
            return Err(WharfError::new(
                Code::Conflict,
                format!("session `{id}` was used since it went idle"),
            ));
        }
        let now = now_ms();
        let until = (paused_ttl_seconds > 0)
            .then(|| crate::bounded::after_seconds(now, paused_ttl_seconds));
        let Some(generation) = self.store.mark_paused(&record, now, until, cap).await? else {
            self.cache_drop(id);
            let now_stored = self.store.get_session(id).await?;
            if now_stored.is_some_and(|r| r.generation == record.generation) {
                return Err(cap_reached(&record, cap, "paused"));
            }
            return Err(changed(id));
        };
        let mut paused = record.clone();
        paused.state = SessionState::Paused;
        paused.last_activity_ms = now;
        paused.paused_until_ms = until;
        paused.generation = generation;
        self.cache_drop(id);
        if let Err(e) = backend.behaviour().suspend(&paused.view(), false).await {
            // Nothing was frozen that the row should own up to: it is ready again.
            self.store
                .mark_resumed(id, generation, now_ms(), record.max_expires_at_ms)
                .await?;
            return Err(e);
        }
        self.wake_expiry(id);
        Ok(paused)
    }

    /// Resumes `record` when it is paused, for a caller that holds the session's turn;
    /// the record as it is now, and whether it was resumed.
    pub async fn resume_held(
        &self,
        backend: &LoadedBackend,
        record: SessionRecord,
    ) -> Result<(SessionRecord, bool), WharfError> {
        if record.state != SessionState::Paused {
            return Ok((record, false));
        }
        if let Err(e) = backend.behaviour().suspend(&record.view(), true).await {
            if sandbox_gone(&e) {
                // Its sandbox is gone (removed by hand, or the engine lost it): the
                // session cannot be resumed, so it is released.
                tracing::warn!(session = %record.id, "a paused session's sandbox is gone: {}", e.message);
                let _ = self.release(Some(backend), &record, None).await;
                return Err(WharfError::session_not_found(format!(
                    "session `{}` was paused and its sandbox is gone ({}); it was released",
                    record.id, e.message
                )));
            }
            return Err(e);
        }
        let now = now_ms();
        let max_expires = lifetime_end_after_rest(&record, now);
        let Some(generation) = self
            .store
            .mark_resumed(&record.id, record.generation, now, max_expires)
            .await?
        else {
            self.cache_drop(&record.id);
            return Err(changed(&record.id));
        };
        Ok((self.ready_again(record, now, max_expires, generation), true))
    }

    /// `record` as its row now is after a resume or a restore (ready at `generation`, its
    /// lifetime's end at `max_expires`), cached, its expiry timer woken.
    pub(super) fn ready_again(
        &self,
        mut record: SessionRecord,
        now: u64,
        max_expires: Option<u64>,
        generation: u64,
    ) -> SessionRecord {
        record.state = SessionState::Ready;
        record.last_activity_ms = now;
        record.paused_until_ms = None;
        record.max_expires_at_ms = max_expires;
        record.generation = generation;
        self.cache_put(&record);
        self.wake_expiry(&record.id);
        record
    }

    /// Makes a paused row true after a restart: its sandbox frozen again (a no-op when
    /// it is). False when its sandbox is gone, so the caller removes the session.
    pub(super) async fn repause(&self, backend: &LoadedBackend, record: &SessionRecord) -> bool {
        match backend.behaviour().suspend(&record.view(), false).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(session = %record.id, "re-pausing a paused session failed: {}", e.message);
                !sandbox_gone(&e)
            }
        }
    }
}

/// Whether a pause or resume failed because the sandbox no longer exists (the engine's
/// "not found", 4000, as the provider passed it on).
fn sandbox_gone(e: &WharfError) -> bool {
    e.code == Code::InvalidInput && e.message.contains("not found")
}

fn check_backend(backend: &LoadedBackend, record: &SessionRecord) -> Result<(), WharfError> {
    if record.backend != *backend.name {
        return Err(not_found(&record.id));
    }
    Ok(())
}

/// The end of `record`'s lifetime moved on by the time it rested (paused or archived since
/// its last activity), so a session does not lose the time it spent out.
pub(super) fn lifetime_end_after_rest(record: &SessionRecord, now: u64) -> Option<u64> {
    let rested_for = now.saturating_sub(record.last_activity_ms);
    record.max_expires_at_ms.map(|end| {
        end.saturating_add(rested_for)
            .min(crate::bounded::MAX_TIMESTAMP_MS)
    })
}

pub(super) fn changed(id: &str) -> WharfError {
    WharfError::new(
        Code::Conflict,
        format!("session `{id}` was changed by another call meanwhile; try again"),
    )
}

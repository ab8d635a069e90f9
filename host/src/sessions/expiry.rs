//! Idle expiry: one timer per session, re-checking the store before acting (another node
//! may have used the session meanwhile). A backend's `on_idle` says what expiry does: a
//! ready session is released; or paused, then released when its paused lifetime runs out;
//! or archived (snapshotted, its sandbox destroyed: the front door's, through
//! [`ArchiveIdle`]), then released when its archived lifetime runs out. A paused session
//! whose paused lifetime ran out is released, or archived under `on_paused_ttl =
//! "snapshot"`.

use super::{PauseAsk, SessionManager, now_ms};
use crate::config::{OnIdle, OnPausedTtl, SessionLimits};
use crate::error_code::Code;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::SessionState;
use crate::tenant::Tenant;
use std::sync::Arc;
use std::time::Duration;

/// Longest sleep of an expiry timer before it reads its session again.
const EXPIRY_RECHECK: Duration = Duration::from_secs(24 * 3600);

/// Finds a loaded backend by name (the front door's registry), for releasing a session
/// through its backend's cleanup.
pub type BackendOf = Arc<dyn Fn(&str) -> Option<Arc<LoadedBackend>> + Send + Sync>;

/// What expiry does with a session: its backend's `[backends.NAME.sessions]`, and the cap
/// a pause of it is under (its backend's and its tenant's).
#[derive(Debug, Clone, Default)]
pub struct IdlePolicy {
    /// The backend's session settings.
    pub limits: SessionLimits,
    /// The most paused sessions of its backend and of its tenant.
    pub pause_cap: crate::store::PauseCap,
}

/// The idle policy of a session.
pub type IdlePolicyOf = Arc<dyn Fn(&super::SessionRecord) -> IdlePolicy + Send + Sync>;

/// Archives an idle session (the front door's: a snapshot, then
/// [`SessionManager::archive_held`]): its id, and the activity it must not have moved past
/// (ms). A 4030 says a quota refused the snapshot.
pub type ArchiveIdle = Arc<
    dyn Fn(
            String,
            u64,
        )
            -> futures::future::BoxFuture<'static, Result<(), crate::error_code::WharfError>>
        + Send
        + Sync,
>;

/// What an expiry timer does next.
enum Next {
    /// Stop: the session is gone (or its release failed and stays with the sweeper).
    Done,
    /// Read the session again at once.
    ReadAgain,
    /// Read it again after this long, or when woken.
    Sleep(Duration),
    /// Read it again when woken: nothing ends it now.
    WaitForWake,
}

/// Whether a pause that failed with `code` is given up for a release: only past its cap.
fn past_cap(code: Code) -> bool {
    code == Code::Forbidden
}

/// Whether an archive that failed with `code` is given up for a release: all but a
/// session used meanwhile and an engine or store that did not answer.
fn gives_up(code: Code) -> bool {
    !matches!(
        code,
        Code::Conflict | Code::BackendUnavailable | Code::DependencyFailure
    )
}

impl SessionManager {
    /// Arms the idle-expiry timer of session `id`; it lives as long as the manager and
    /// releases (or, under `on_idle = "pause"`, pauses; under `"snapshot"`, archives
    /// through `archive`) the session through `backend_of`'s backend once it expired.
    pub fn watch_expiry(
        self: &Arc<Self>,
        id: String,
        backend_of: BackendOf,
        policy_of: IdlePolicyOf,
        archive: ArchiveIdle,
    ) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // One timer per session: a second watch only wakes the first to read again.
        let wake = {
            let Ok(mut timers) = self.expiry_timers.lock() else {
                return;
            };
            if let Some(wake) = timers.get(&id) {
                wake.notify_one();
                return;
            }
            let wake = Arc::new(tokio::sync::Notify::new());
            timers.insert(id.clone(), wake.clone());
            wake
        };
        let weak = Arc::downgrade(self);
        handle.spawn(async move {
            loop {
                let Some(sessions) = weak.upgrade() else {
                    return;
                };
                let record = match sessions.store.get_session(&id).await {
                    Ok(Some(record)) => record,
                    Ok(None) => break,
                    Err(_) => {
                        drop(sessions);
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        continue;
                    }
                };
                let now = now_ms();
                let next = match record.expires_at_ms() {
                    // Nothing ends it now; a pause, archive or resume may change that.
                    None => Next::WaitForWake,
                    Some(expires) if now < expires => {
                        // Woken at least daily: a far expiry (or a saturated "never") is
                        // re-read rather than slept on.
                        Next::Sleep(Duration::from_millis(expires - now).min(EXPIRY_RECHECK))
                    }
                    Some(_) => {
                        let backend = backend_of(&record.backend);
                        sessions
                            .expire(&record, backend, policy_of(&record), &archive, now)
                            .await
                    }
                };
                drop(sessions);
                match next {
                    Next::Done => break,
                    Next::ReadAgain => {}
                    Next::Sleep(wait) => {
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = wake.notified() => {}
                        }
                    }
                    Next::WaitForWake => wake.notified().await,
                }
            }
            if let Some(sessions) = weak.upgrade()
                && let Ok(mut timers) = sessions.expiry_timers.lock()
            {
                timers.remove(&id);
            }
        });
    }

    /// Acts on an expired session: keeps it (paused or archived) when its policy says so
    /// and its backend can, else releases it, as `on_idle = "destroy"` would. A way of
    /// keeping it that cannot succeed (a cap, a quota, a sandbox that cannot be
    /// snapshotted) is given up for the release; one that may succeed later (used
    /// meanwhile, an engine or store that did not answer) is tried again after a while.
    async fn expire(
        &self,
        record: &super::SessionRecord,
        backend: Option<Arc<LoadedBackend>>,
        policy: IdlePolicy,
        archive: &ArchiveIdle,
        now: u64,
    ) -> Next {
        let IdlePolicy { limits, pause_cap } = policy;
        let id = &record.id;
        // The running lifetime's end is a release, whatever `on_idle` says.
        let lifetime_over = record.max_expires_at_ms.is_some_and(|end| now >= end);
        let keepable = !lifetime_over
            && backend
                .as_ref()
                .is_some_and(|b| b.behaviour().suspendable());
        let idle_since = record.last_activity_ms;
        type Kept = (
            &'static str,
            Result<(), crate::error_code::WharfError>,
            fn(Code) -> bool,
        );
        let kept: Option<Kept> = match (&backend, record.state) {
            (Some(backend), SessionState::Ready) if keepable && limits.on_idle == OnIdle::Pause => {
                let paused = self
                    .pause(
                        backend,
                        &Tenant::Every,
                        id,
                        limits.paused_ttl_seconds,
                        PauseAsk::IdleSince(idle_since),
                        pause_cap,
                    )
                    .await;
                Some(("paused", paused.map(drop), past_cap))
            }
            (_, SessionState::Ready) if keepable && limits.on_idle == OnIdle::Snapshot => {
                Some(("archived", archive(id.clone(), idle_since).await, gives_up))
            }
            (_, SessionState::Paused)
                if keepable && limits.on_paused_ttl == OnPausedTtl::Snapshot =>
            {
                Some(("archived", archive(id.clone(), idle_since).await, gives_up))
            }
            _ => None,
        };
        match kept {
            Some((what, Ok(()), _)) => {
                tracing::info!(session = %id, "session went idle and was {what}");
                // Read again: it now waits for its paused or archived lifetime.
                return Next::ReadAgain;
            }
            Some((what, Err(e), give_up)) if !give_up(e.code) => {
                tracing::debug!(session = %id, "an idle session was not {what}: {}", e.message);
                return Next::Sleep(Duration::from_secs(5));
            }
            Some((what, Err(e), _)) => {
                tracing::info!(session = %id, "an idle session that cannot be {what} is released: {}", e.message);
            }
            None => {}
        }
        match self
            .release(backend.as_deref(), record, Some(idle_since))
            .await
        {
            Ok(true) => {
                tracing::info!(session = %id, state = record.state.as_str(), "session expired and was released");
                Next::Done
            }
            // Used or released meanwhile: read it again.
            Ok(false) => Next::ReadAgain,
            Err(e) => {
                tracing::warn!(session = %id, "releasing an expired session failed: {}", e.message);
                Next::Done
            }
        }
    }

    /// Wakes session `id`'s expiry timer to read it again (its expiry moved: paused,
    /// archived, resumed or restored).
    pub(super) fn wake_expiry(&self, id: &str) {
        if let Ok(timers) = self.expiry_timers.lock()
            && let Some(wake) = timers.get(id)
        {
            wake.notify_one();
        }
    }
}

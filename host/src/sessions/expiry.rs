//! Idle expiry: one timer per session, re-checking the store before acting (another node
//! may have used the session meanwhile). A backend's `on_idle` says what expiry does: a
//! ready session is released, or paused and then released when its paused lifetime runs
//! out.

use super::{PauseAsk, SessionManager, now_ms};
use crate::config::{OnIdle, SessionLimits};
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

impl SessionManager {
    /// Arms the idle-expiry timer of session `id`; it lives as long as the manager and
    /// releases (or, under `on_idle = "pause"`, pauses) the session through `backend_of`'s
    /// backend once it expired.
    pub fn watch_expiry(
        self: &Arc<Self>,
        id: String,
        backend_of: BackendOf,
        policy_of: IdlePolicyOf,
    ) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        handle.spawn(async move {
            loop {
                let Some(sessions) = weak.upgrade() else { return };
                let record = match sessions.store.get_session(&id).await {
                    Ok(Some(record)) => record,
                    Ok(None) => return,
                    Err(_) => {
                        drop(sessions);
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        continue;
                    }
                };
                let Some(expires) = record.expires_at_ms() else { return };
                let now = now_ms();
                if now >= expires {
                    let backend = backend_of(&record.backend);
                    let IdlePolicy {
                        limits: policy,
                        pause_cap,
                    } = policy_of(&record);
                    // The running lifetime's end is a release, whatever `on_idle` says.
                    let lifetime_over = record.max_expires_at_ms.is_some_and(|end| now >= end);
                    if record.state == SessionState::Ready
                        && policy.on_idle == OnIdle::Pause
                        && !lifetime_over
                        && let Some(backend) = &backend
                        && backend.behaviour().suspendable()
                    {
                        let paused = sessions.pause(backend, &Tenant::Every, &id, policy.paused_ttl_seconds, PauseAsk::IdleSince(record.last_activity_ms), pause_cap).await;
                        match paused {
                            Ok(_) => tracing::info!(session = %id, "session went idle and was paused"),
                            // Past the paused cap: released, as `on_idle = "destroy"` would.
                            Err(e) if e.code == crate::error_code::Code::Forbidden => {
                                tracing::info!(session = %id, "an idle session past the paused cap is released: {}", e.message);
                                match sessions.release(Some(backend), &record, Some(record.last_activity_ms)).await {
                                    Ok(true) | Err(_) => return,
                                    Ok(false) => continue,
                                }
                            }
                            Err(e) => {
                                // Used meanwhile, or the engine did not answer: read it
                                // again after a pause of our own.
                                tracing::debug!(session = %id, "pausing an idle session: {}", e.message);
                                drop(sessions);
                                tokio::time::sleep(Duration::from_secs(5)).await;
                            }
                        }
                        // Read again: paused, it now waits for its paused lifetime.
                        continue;
                    }
                    match sessions.release(backend.as_deref(), &record, Some(record.last_activity_ms)).await {
                        Ok(true) => tracing::info!(session = %id, state = record.state.as_str(), "session expired and was released"),
                        Ok(false) => continue,
                        Err(e) => tracing::warn!(session = %id, "releasing an expired session failed: {}", e.message),
                    }
                    return;
                }
                drop(sessions);
                // Woken at least daily: a far expiry (or a saturated "never") is re-read
                // rather than slept on.
                let wait = Duration::from_millis(expires.saturating_sub(now)).min(EXPIRY_RECHECK);
                tokio::time::sleep(wait).await;
            }
        });
    }
}

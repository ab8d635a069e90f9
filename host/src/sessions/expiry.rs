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
            let timer = async {
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
                let Some(expires) = record.expires_at_ms() else {
                    // Nothing ends it now; a pause, archive or resume may change that.
                    drop(sessions);
                    wake.notified().await;
                    continue;
                };
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
                    let archives = match record.state {
                        SessionState::Ready => policy.on_idle == OnIdle::Snapshot,
                        SessionState::Paused => policy.on_paused_ttl == OnPausedTtl::Snapshot,
                        _ => false,
                    };
                    if archives
                        && !lifetime_over
                        && backend.as_ref().is_some_and(|b| b.behaviour().suspendable())
                    {
                        match archive(id.clone(), record.last_activity_ms).await {
                            Ok(()) => tracing::info!(session = %id, "session went idle and was archived"),
                            // Used meanwhile, or the engine or store did not answer: read it
                            // again after a pause of our own.
                            Err(e) if matches!(e.code, Code::Conflict | Code::BackendUnavailable | Code::DependencyFailure) => {
                                tracing::debug!(session = %id, "archiving an idle session: {}", e.message);
                                drop(sessions);
                                tokio::time::sleep(Duration::from_secs(5)).await;
                            }
                            // Past a quota or cap, or a sandbox that cannot be snapshotted (an
                            // image without a shell): released, as `on_idle = "destroy"` would,
                            // rather than kept past its idle TTL for ever.
                            Err(e) => {
                                tracing::warn!(session = %id, "an idle session that cannot be archived is released: {}", e.message);
                                match sessions.release(backend.as_deref(), &record, Some(record.last_activity_ms)).await {
                                    Ok(true) | Err(_) => return,
                                    Ok(false) => continue,
                                }
                            }
                        }
                        // Read again: archived, it now waits for its archived lifetime.
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
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = wake.notified() => {}
                }
            }
            };
            timer.await;
            if let Some(sessions) = weak.upgrade()
                && let Ok(mut timers) = sessions.expiry_timers.lock()
            {
                timers.remove(&id);
            }
        });
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

//! Idle expiry: one timer per session, re-checking the store before acting (another node
//! may have used the session meanwhile).

use super::{SessionManager, now_ms};
use crate::runtime::loaded_backend::LoadedBackend;
use std::sync::Arc;
use std::time::Duration;

/// Longest sleep of an expiry timer before it reads its session again.
const EXPIRY_RECHECK: Duration = Duration::from_secs(24 * 3600);

/// Finds a loaded backend by name (the front door's registry), for releasing a session
/// through its backend's cleanup.
pub type BackendOf = Arc<dyn Fn(&str) -> Option<Arc<LoadedBackend>> + Send + Sync>;

impl SessionManager {
    /// Arms the idle-expiry timer of session `id`; it lives as long as the manager and
    /// releases the session (through `backend_of`'s backend) once it expired.
    pub fn watch_expiry(self: &Arc<Self>, id: String, backend_of: BackendOf) {
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
                    match sessions.release(backend.as_deref(), &record, Some(record.last_activity_ms)).await {
                        Ok(true) => tracing::info!(session = %id, "session expired and was released"),
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

//! Archiving and restoring a session (`on_idle = "snapshot"`): the front door snapshots a
//! ready session's sandbox, then this module writes the row `archived` and destroys the
//! sandbox; a restore makes a new sandbox from the snapshot's image, then writes the row
//! `ready` with its data. Both run under the session's turn on this node.
//!
//! Order, so that a crash anywhere loses nothing: the snapshot is `ready` before the row
//! names it, and the row says `archived` before the sandbox is destroyed. A crash before
//! the row leaves a ready session and a snapshot no row holds (`stale_archives`, swept); a
//! crash after it leaves an archived session whose old sandbox the reaper removes (made
//! before the archive). A restore's new sandbox is made before the row says `ready`: a
//! crash between leaves an archived session, and its new sandbox is the reaper's once it is
//! older than [`RESTORE_GRACE_MS`].

use super::{SessionManager, SessionRecord, hooks, now_ms};
use crate::error_code::WharfError;
use crate::runtime::backend::SandboxGrant;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::{PauseCap, SessionState};
use serde_json::Value;

/// How long a sandbox made for an archived session may exist before its row says `ready`
/// (a restore in progress); older, it is a crashed restore's and the reaper removes it, ms.
pub const RESTORE_GRACE_MS: u64 = 600_000;

impl SessionManager {
    /// Archives `record` (ready, its turn held by the caller, its sandbox already in
    /// snapshot `archive`): the row → `archived`, ending `archived_ttl_seconds` from now
    /// unless restored (0: never), then its sandbox destroyed. 4030 past `cap`
    /// (`data.quota = "archived_sessions"`), 4090 when the row changed.
    pub async fn archive_held(
        &self,
        backend: &LoadedBackend,
        record: &SessionRecord,
        archive: &str,
        archived_ttl_seconds: u64,
        cap: PauseCap,
    ) -> Result<SessionRecord, WharfError> {
        let now = now_ms();
        let until = (archived_ttl_seconds > 0)
            .then(|| crate::bounded::after_seconds(now, archived_ttl_seconds));
        let generation = self
            .store
            .mark_archived(record, archive, now, until, cap)
            .await?;
        self.cache_drop(&record.id);
        let Some(generation) = generation else {
            let now_stored = self.store.get_session(&record.id).await?;
            if now_stored.is_some_and(|r| r.generation == record.generation) {
                return Err(super::pauses::cap_reached(record, cap, "archived"));
            }
            return Err(super::pauses::changed(&record.id));
        };
        // The row says archived: a sandbox a failure leaves here was made before it, so
        // the reaper removes it.
        if let Err(e) = self.cleanup_with_retries(backend, record).await {
            tracing::warn!(session = %record.id, "destroying an archived session's sandbox: {}", e.message);
        }
        let mut archived = record.clone();
        archived.state = SessionState::Archived;
        archived.archive = Some(archive.to_string());
        archived.last_activity_ms = now;
        archived.paused_until_ms = until;
        archived.generation = generation;
        self.wake_expiry(&archived.id);
        Ok(archived)
    }

    /// Restores archived `record` (its turn held by the caller): a new sandbox made with
    /// `config` and `grant` (the archive's image, the session's volumes), then the row →
    /// `ready` with its data. The running lifetime it had left when archived is what it
    /// has now. On a lost compare-and-set the new sandbox is cleaned up (4090).
    pub async fn restore_held(
        &self,
        backend: &LoadedBackend,
        record: SessionRecord,
        config: &Value,
        grant: SandboxGrant,
    ) -> Result<SessionRecord, WharfError> {
        let now = now_ms();
        let max_expires = super::pauses::lifetime_end_after_rest(&record, now);
        let lifetime_seconds =
            max_expires.map_or(0, |end| end.saturating_sub(now).div_ceil(1000).max(1));
        let data =
            hooks::initialize(backend, &record, config, lifetime_seconds, false, grant).await?;
        let now = now_ms();
        let generation = self
            .store
            .mark_restored(&record.id, record.generation, &data, now, max_expires)
            .await?;
        let mut ready = record;
        ready.data = data;
        let Some(generation) = generation else {
            self.cache_drop(&ready.id);
            if let Err(e) = hooks::cleanup(backend, &ready).await {
                tracing::warn!(session = %ready.id, "removing a lost restore's sandbox: {}", e.message);
            }
            return Err(super::pauses::changed(&ready.id));
        };
        Ok(self.ready_again(ready, now, max_expires, generation))
    }
}

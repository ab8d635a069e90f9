//! Archives (issue 37): under `on_idle = "snapshot"` an idle session's sandbox is
//! snapshotted (a snapshot the host makes `archive_of` the session) and destroyed
//! (`sessions/archives`); the next call, or a resume, restores it from that snapshot with
//! its files (`begin_live_call`), and the reply says it was resumed. Memory and processes
//! are not kept. The snapshot goes with the session: at its delete, or by the sweep once no
//! session holds it (`StateStore::stale_archives`).

use super::Wharf;
use crate::error_code::{Code, WharfError};
use crate::runtime::loaded_backend::LoadedBackend;
use crate::session_record::{SessionRecord, SessionState};
use crate::snapshot_record::{SnapshotRecord, SnapshotState};
use crate::tenant::Tenant;

/// An archive snapshot no session holds is removed once it is this old, ms: an archive
/// writes its row right after its commit, so the margin only covers that step.
const ARCHIVE_SETTLE_MS: u64 = 10_000;

impl Wharf {
    /// Archives idle session `id` (ready, or paused past its paused TTL) unless it was used
    /// after `idle_since` (ms; 4090) or is in another state now (nothing to do). A
    /// snapshot quota's or an archived cap's refusal is a 4030.
    pub(super) async fn archive_idle(&self, id: &str, idle_since: u64) -> Result<(), WharfError> {
        let (record, _turn) = self.sessions.begin_call(&Tenant::Every, id).await?;
        if !matches!(record.state, SessionState::Ready | SessionState::Paused) {
            return Ok(());
        }
        if record.last_activity_ms > idle_since {
            return Err(WharfError::new(
                Code::Conflict,
                format!("session `{id}` was used since it went idle"),
            ));
        }
        let backend = self.backend(&record.backend)?;
        // A frozen sandbox cannot copy its work dir: it is thawed for its snapshot (briefly,
        // outside the `containers` quota, as it is about to be destroyed).
        let (record, _) = self.sessions.resume_held(&backend, record).await?;
        let limits = self
            .backend_config(&record.backend)
            .map(|c| c.sessions)
            .unwrap_or_default();
        let cap = super::session_pauses::archive_cap(&self.services.quotas, &limits, &record);
        let started = std::time::Instant::now();
        let snapshot = self
            .snapshot_held(&record, Some(format!("archive of {id}")), Some(id))
            .await?;
        if let Err(e) = self
            .sessions
            .archive_held(
                &backend,
                &record,
                &snapshot.id,
                limits.archived_ttl_seconds,
                cap,
            )
            .await
        {
            self.forget_snapshot(&snapshot).await;
            return Err(e);
        }
        // A session restored and archived again no longer needs its earlier archive (its
        // sandbox, which ran from it, is gone).
        if let Some(earlier) = record.archive.as_deref().filter(|a| *a != snapshot.id)
            && let Ok(Some(earlier)) = self.sessions.store().get_snapshot(earlier).await
        {
            self.forget_snapshot(&earlier).await;
        }
        tracing::info!(target: "wharf::audit", event = "session_archive", tenant = %record.tenant, backend = %record.backend, session = %id, snapshot = %snapshot.id, bytes = snapshot.bytes, duration_ms = started.elapsed().as_millis() as u64);
        Ok(())
    }

    /// Restores archived `record` for a caller that holds its turn: a new sandbox from its
    /// archive with the config and volumes it was made with. A session whose archive is
    /// gone cannot come back: it is released (4007).
    pub(super) async fn restore_held(
        &self,
        backend: &LoadedBackend,
        record: SessionRecord,
    ) -> Result<SessionRecord, WharfError> {
        let store = self.sessions.store();
        let snapshot = match &record.archive {
            Some(archive) => store
                .get_snapshot(archive)
                .await?
                .filter(|s| s.state == SnapshotState::Ready),
            None => None,
        };
        let Some(snapshot) = snapshot else {
            tracing::warn!(session = %record.id, "an archived session's snapshot is gone; it is released");
            let _ = self.sessions.release(Some(backend), &record, None).await;
            return Err(WharfError::session_not_found(format!(
                "session `{}` was archived and its snapshot is gone; it was released",
                record.id
            )));
        };
        let config = self
            .sessions
            .kept_config(&record.id)
            .await?
            .unwrap_or(serde_json::Value::Null);
        let volumes = self
            .session_volumes(&record.tenant, backend, &config)
            .await?;
        let grant = crate::runtime::backend::SandboxGrant {
            from_image: Some(snapshot.image),
            volumes,
        };
        let started = std::time::Instant::now();
        let restored = self
            .sessions
            .restore_held(backend, record, &config, grant)
            .await?;
        tracing::info!(target: "wharf::audit", event = "session_restore", tenant = %restored.tenant, backend = %restored.backend, session = %restored.id, snapshot = %snapshot.id, duration_ms = started.elapsed().as_millis() as u64);
        Ok(restored)
    }

    /// Removes the archive of a session that is gone (best effort: what fails here the
    /// sweep removes).
    pub(super) async fn drop_archive(&self, record: &SessionRecord) {
        let Some(archive) = &record.archive else {
            return;
        };
        let store = self.sessions.store();
        if !matches!(store.get_session(&record.id).await, Ok(None)) {
            return;
        }
        if let Ok(Some(snapshot)) = store.get_snapshot(archive).await {
            self.forget_snapshot(&snapshot).await;
        }
    }

    /// 4090 when `snapshot` is the archive a session still holds (its restore, or the
    /// image its restored sandbox runs from).
    pub(super) async fn check_not_held_archive(
        &self,
        snapshot: &SnapshotRecord,
    ) -> Result<(), WharfError> {
        let Some(session) = &snapshot.archive_of else {
            return Ok(());
        };
        let held = self
            .sessions
            .store()
            .get_session(session)
            .await?
            .is_some_and(|s| s.archive.as_deref() == Some(snapshot.id.as_str()));
        if held {
            return Err(WharfError::new(
                Code::Conflict,
                format!(
                    "snapshot `{}` is the archive of session `{session}`; it goes when the session is deleted",
                    snapshot.id
                ),
            ));
        }
        Ok(())
    }

    /// Removes this node's archive snapshots no session holds (a session restored and
    /// archived again, released, or an archive that crashed before its row): their ids.
    pub(super) async fn sweep_archives(&self) -> Result<Vec<String>, WharfError> {
        let settled_before = crate::clock::now_ms().saturating_sub(ARCHIVE_SETTLE_MS);
        let mut swept = Vec::new();
        for snapshot in self
            .sessions
            .store()
            .stale_archives(&self.node_id, settled_before)
            .await?
        {
            if self.forget_snapshot(&snapshot).await {
                swept.push(snapshot.id);
            }
        }
        Ok(swept)
    }
}

//! After a restart (or on a node that has never seen them): adopt every stored session of
//! a backend whose resources still exist, remove the records whose resources are gone,
//! freeze paused sessions' sandboxes again, keep archived ones (and arm their timers), and finish creations and releases whose lease
//! ran out.

use super::{SessionManager, SessionRecord, now_ms};
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::{BadSessionRow, SessionState};

/// What recovery did for one backend.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Sessions adopted (resources alive).
    pub adopted: Vec<String>,
    /// Records removed (resources gone, or a creation that never finished).
    pub removed: Vec<String>,
    /// Damaged rows left alone (a number out of range, an unknown state): never adopted,
    /// never acted on, and never a reason to stop recovering the others.
    pub skipped: Vec<BadSessionRow>,
}

impl SessionManager {
    /// Recovers the stored sessions of `backend`; returns the adopted ready and paused
    /// sessions too.
    pub async fn recover(
        &self,
        backend: &LoadedBackend,
    ) -> Result<(RecoveryReport, Vec<SessionRecord>), WharfError> {
        let mut report = RecoveryReport::default();
        let mut adopted = Vec::new();
        for row in self
            .store
            .list_session_rows(None, Some(&backend.name), None)
            .await?
        {
            let row = match row {
                Ok(row) => row,
                Err(bad) => {
                    tracing::warn!(session = %bad.id, backend = %backend.name, "skipped a damaged session row: {}", bad.reason);
                    report.skipped.push(bad);
                    continue;
                }
            };
            let now = now_ms();
            match row.state {
                SessionState::Ready => match self.adopt(backend, row.clone()).await {
                    Ok(Some(record)) => {
                        report.adopted.push(record.id.clone());
                        adopted.push(record);
                    }
                    Ok(None) => report.removed.push(row.id.clone()),
                    Err(e) => {
                        tracing::warn!(session = %row.id, "could not check a stored session: {}", e.message)
                    }
                },
                // A crash may have come between the row and the freezer: the row is
                // made true (its sandbox frozen again, a no-op when it is).
                SessionState::Paused => {
                    if self.repause(backend, &row).await {
                        report.adopted.push(row.id.clone());
                        adopted.push(row);
                    } else if self.release(Some(backend), &row, None).await? {
                        report.removed.push(row.id.clone());
                    }
                }
                // No sandbox to check: its snapshot is the sweeper's to keep or remove,
                // and a sandbox left of it is the reaper's.
                SessionState::Archived => {
                    report.adopted.push(row.id.clone());
                    adopted.push(row);
                }
                // It never became ready, so nobody holds it; what it made is an orphan for
                // the reaper.
                SessionState::Creating
                    if row.lease_until_ms < now
                        && self
                            .store
                            .delete_session_at(&row.id, row.generation)
                            .await? =>
                {
                    report.removed.push(row.id.clone());
                }
                SessionState::Releasing if row.lease_until_ms < now => {
                    let lease_until = (now + self.lease.as_millis() as u64) as i64;
                    if self
                        .store
                        .take_over(
                            &row.id,
                            SessionState::Releasing,
                            &self.node,
                            lease_until,
                            now as i64,
                        )
                        .await?
                    {
                        match self.finish_release(backend, &row).await {
                            Ok(()) => report.removed.push(row.id.clone()),
                            Err(e) => {
                                tracing::warn!(session = %row.id, "finishing a release failed: {}", e.message)
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok((report, adopted))
    }
}

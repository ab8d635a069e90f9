//! Release: mark the row `releasing` under a lease, run the backend's cleanup (retried),
//! then delete the row. Nothing is forgotten while its resources may still exist: a
//! cleanup that keeps failing leaves the row `releasing`, and when its lease runs out the
//! next acquire, recovery or sweep finishes the job.

use super::hooks;
use super::{SessionManager, SessionRecord, now_ms};
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use std::time::Duration;

const CLEANUP_ATTEMPTS: u32 = 4;

impl SessionManager {
    /// Releases a ready session. With `idle_before`, only if it was not used since (idle
    /// expiry). False when another caller or node released or used it first.
    pub async fn release(
        &self,
        backend: Option<&LoadedBackend>,
        record: &SessionRecord,
        idle_before: Option<u64>,
    ) -> Result<bool, WharfError> {
        let lock = self.call_lock(&record.id)?;
        let _no_calls = lock.lock().await;
        let lease_until = (now_ms() + self.lease.as_millis() as u64) as i64;
        if !self
            .store
            .begin_release(
                &record.id,
                &self.node,
                lease_until,
                idle_before.map(|t| t as i64),
            )
            .await?
        {
            return Ok(false);
        }
        let current = self
            .store
            .get_session(&record.id)
            .await?
            .unwrap_or_else(|| record.clone());
        match backend {
            Some(backend) => self.finish_release(backend, &current).await?,
            None => {
                tracing::warn!(session = %record.id, backend = %record.backend, "backend not loaded: the session is kept releasing until it is");
                return Ok(true);
            }
        }
        Ok(true)
    }

    /// Runs cleanup for a row this node holds as `releasing` (keeping its lease alive
    /// meanwhile), then deletes it.
    pub(crate) async fn finish_release(
        &self,
        backend: &LoadedBackend,
        row: &SessionRecord,
    ) -> Result<(), WharfError> {
        self.holding_lease(&row.id, self.cleanup_with_retries(backend, row))
            .await?;
        self.forget(row).await
    }

    /// Runs the backend's cleanup, retried a few times with backoff.
    pub(super) async fn cleanup_with_retries(
        &self,
        backend: &LoadedBackend,
        row: &SessionRecord,
    ) -> Result<(), WharfError> {
        let mut attempt = 0;
        loop {
            match hooks::cleanup(backend, row).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt + 1 < CLEANUP_ATTEMPTS => {
                    attempt += 1;
                    tracing::warn!(session = %row.id, "cleanup failed (attempt {attempt}): {}", e.message);
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => {
                    return Err(WharfError::new(
                        e.code,
                        format!(
                            "cleanup of session `{}` failed; it stays recorded so its resources are not forgotten: {}",
                            row.id, e.message
                        ),
                    ));
                }
            }
        }
    }

    /// Deletes a finished row, its kv state and what this node remembers of it.
    pub(super) async fn forget(&self, row: &SessionRecord) -> Result<(), WharfError> {
        self.store.delete_session(&row.id).await?;
        self.store.kv_drop_session(&row.backend, &row.id).await?;
        // The host's own rows of the session (its preview epoch, its kept config).
        for owner in [
            crate::preview_signature::PREVIEW_KV_OWNER,
            super::kept_config::SESSION_KV_OWNER,
        ] {
            self.store.kv_drop_session(owner, &row.id).await?;
        }
        self.cache_drop(&row.id);
        if let Ok(mut locks) = self.call_locks.lock() {
            locks.remove(&row.id);
        }
        Ok(())
    }
}

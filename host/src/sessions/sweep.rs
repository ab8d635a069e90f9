//! Rows nobody will finish: a `creating` or `releasing` row whose lease ran out (its node
//! died or lost the store), or that an earlier incarnation of this node held (it was
//! killed). The sweeper takes each over, destroys every container labelled with the
//! session, runs the backend's cleanup, and deletes the row. Meanwhile the rows this
//! incarnation works on keep their lease alive, so a slow creation is never swept.

use super::hooks;
use super::{SessionManager, SessionRecord, now_ms};
use crate::engines::{ContainerEngine, Owner};
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::SessionState;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

impl SessionManager {
    /// Runs `work` on row `id` (held by this node) while renewing the row's lease every
    /// third of the lease.
    pub(super) async fn holding_lease<T>(&self, id: &str, work: impl Future<Output = T>) -> T {
        let every = (self.lease / 3).max(Duration::from_millis(100));
        let mut renewals = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                _ = renewals.tick() => {
                    let until = (now_ms() + self.lease.as_millis() as u64) as i64;
                    if let Err(e) = self.store.renew_lease(id, &self.node, until).await {
                        tracing::warn!(session = %id, "renewing the lease failed: {}", e.message);
                    }
                }
            }
        }
    }

    /// Finishes every abandoned row whose backend `backend_of` knows (a row of a backend
    /// not loaded here is left to a node that has it: only its backend can release what
    /// is not a container). Returns the ids of the rows deleted.
    pub async fn sweep(
        &self,
        backend_of: impl Fn(&str) -> Option<Arc<LoadedBackend>>,
        engine: Option<&dyn ContainerEngine>,
    ) -> Result<Vec<String>, WharfError> {
        let now = now_ms();
        let mut swept = Vec::new();
        for row in self
            .store
            .abandoned_sessions(&self.node, now as i64)
            .await?
        {
            let Some(backend) = backend_of(&row.backend) else {
                continue;
            };
            let until = (now + self.lease.as_millis() as u64) as i64;
            if !self
                .store
                .take_over(&row.id, row.state, &self.node, until, now as i64)
                .await?
            {
                continue;
            }
            let mut taken = row.clone();
            taken.node = self.node.clone();
            taken.generation += 1;
            match self
                .holding_lease(&row.id, self.finish_abandoned(&backend, &taken, engine))
                .await
            {
                Ok(()) => {
                    tracing::info!(session = %row.id, state = ?row.state, from = %row.node, "swept an abandoned session");
                    swept.push(row.id);
                }
                // The row stays with a lease that runs out, so a later sweep tries again.
                Err(e) => {
                    tracing::warn!(session = %row.id, "sweeping an abandoned session failed: {}", e.message)
                }
            }
        }
        Ok(swept)
    }

    async fn finish_abandoned(
        &self,
        backend: &LoadedBackend,
        row: &SessionRecord,
        engine: Option<&dyn ContainerEngine>,
    ) -> Result<(), WharfError> {
        if let Some(engine) = engine {
            let owner = Owner::session(row.backend.clone(), row.id.clone());
            for container in engine.list_owned(&row.backend, Some(&row.id)).await? {
                engine.remove(&owner, &container.id).await?;
            }
        }
        match row.state {
            SessionState::Releasing => {
                self.cleanup_with_retries(backend, row).await?;
                self.forget(row).await
            }
            // A creation never saved its data, so the backend may not know what it made;
            // its cleanup is still asked, and a failure does not keep the row.
            _ => {
                if let Err(e) = hooks::cleanup(backend, row).await {
                    tracing::debug!(session = %row.id, "cleanup of an abandoned creation: {}", e.message);
                }
                self.forget(row).await
            }
        }
    }
}

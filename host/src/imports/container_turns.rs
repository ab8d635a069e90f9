//! Creating a container is counting the backend's containers, checking the count against
//! `grants.max_containers`, then creating: two creates that count at once would each see
//! the same free slot. A create therefore takes the backend's turn first: a lock in this
//! process, then (when the host has a state store, which nodes may share) the backend's
//! lock row in the store, and keeps both until the container exists or the create failed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use super::{guest_error, wharf_error};
use crate::clock::now_ms;
use crate::engines::CreateLedger;
use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;

/// How long a store lock is held at most: longer than a list, a create and an inspect
/// (each bounded by the Docker client's call limit), so a live holder never loses it; a
/// node that died holding it blocks the backend's creates only until its node lease runs
/// out (the store frees a lock whose node is gone).
const LEASE: Duration = Duration::from_secs(200);
/// How long a create waits for another node's turn before answering retryable 5012.
const WAIT: Duration = Duration::from_secs(30);
/// First pause between tries for the store lock; doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Where a backend's turns are kept: this process's locks, and the ledger nodes share (the
/// state store; absent only on a host that never runs a call, e.g. one describing a
/// component).
#[derive(Debug, Default)]
pub struct CreateTurns {
    node_id: String,
    store: Option<Arc<dyn CreateLedger>>,
    local: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl CreateTurns {
    /// The turns of node `node_id`, shared with other nodes through `store`.
    pub fn new(node_id: impl Into<String>, store: Option<Arc<dyn CreateLedger>>) -> Self {
        Self {
            node_id: node_id.into(),
            store,
            local: std::sync::Mutex::default(),
        }
    }

    /// The shared ledger (the tenant's sessions are counted against it).
    pub fn ledger(&self) -> Option<&dyn CreateLedger> {
        self.store.as_deref()
    }

    /// The lock a caller holds across counting `backend`'s containers and creating one,
    /// so that concurrent creates in this process cannot each count the same free slot.
    fn local(&self, backend: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        turns.entry(backend.to_string()).or_default().clone()
    }
}

/// A backend's turn to count and create; give it back with [`CreateTurn::end`].
pub struct CreateTurn {
    _local: OwnedMutexGuard<()>,
    stored: Option<StoredLock>,
}

struct StoredLock {
    store: Arc<dyn CreateLedger>,
    backend: String,
    holder: String,
}

impl StoredLock {
    async fn release(self) {
        if let Err(e) = self.store.unlock_backend(&self.backend, &self.holder).await {
            tracing::warn!(backend = %self.backend, error = %e.message, "could not release the backend's create lock; it lapses with its lease");
        }
    }
}

/// Waits for `backend`'s turn: this process's lock, then the store's.
pub async fn take(turns: &CreateTurns, backend: &str) -> Result<CreateTurn, Error> {
    let local = turns.local(backend).lock_owned().await;
    let Some(store) = &turns.store else {
        return Ok(CreateTurn {
            _local: local,
            stored: None,
        });
    };
    let holder = format!("{}:{}", turns.node_id, uuid::Uuid::new_v4().simple());
    let began = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        let until = now.saturating_add(i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX));
        if store
            .try_lock_backend(backend, &holder, &turns.node_id, now, until)
            .await
            .map_err(wharf_error)?
        {
            return Ok(CreateTurn {
                _local: local,
                stored: Some(StoredLock {
                    store: store.clone(),
                    backend: backend.to_string(),
                    holder,
                }),
            });
        }
        if began.elapsed() >= WAIT {
            let mut e = guest_error(
                Code::DependencyFailure,
                "another node has been creating a container for this backend for too long; try again",
            );
            e.retryable = true;
            return Err(e);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

impl CreateTurn {
    /// Gives the turn back (the store's lock first, then this process's).
    pub async fn end(mut self) {
        if let Some(stored) = self.stored.take() {
            stored.release().await;
        }
    }
}

impl Drop for CreateTurn {
    /// A create dropped mid-way (its call was cancelled) still gives the store's lock back,
    /// rather than leaving the backend blocked until the lease runs out.
    fn drop(&mut self) {
        if let Some(stored) = self.stored.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            handle.spawn(stored.release());
        }
    }
}

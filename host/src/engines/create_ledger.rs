//! What the container import's create turns and the tenant's container quota ask of the
//! store that nodes share: a backend's create lock (held across counting its containers and
//! creating one, so two nodes cannot each count the same free slot) and which sessions a
//! tenant holds. The state store implements it (`store::StateStore`, in
//! `store/backend_locks.rs`); a host with no shared store has none, and its turns are then
//! this process's alone.

use crate::error_code::WharfError;
use async_trait::async_trait;
use std::collections::HashSet;

/// The shared ledger of creates: backend locks and the tenants' sessions.
#[async_trait]
pub trait CreateLedger: std::fmt::Debug + Send + Sync {
    /// Takes `backend`'s create lock for `holder` (on `node`) until `until_ms`, unless a
    /// live holder has it at `now_ms`; true when taken.
    async fn try_lock_backend(
        &self,
        backend: &str,
        holder: &str,
        node: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool, WharfError>;

    /// Gives `backend`'s lock back if `holder` still holds it.
    async fn unlock_backend(&self, backend: &str, holder: &str) -> Result<(), WharfError>;

    /// The ids of `tenant`'s sessions: of `backend`, or of every backend when `None`.
    async fn tenant_sessions(
        &self,
        tenant: &str,
        backend: Option<&str>,
    ) -> Result<HashSet<String>, WharfError>;
}

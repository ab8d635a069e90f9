//! One session as the host knows it (its stored row, decoded) and where it is in its life:
//! shared names, kept in a leaf so that the store, the session service, the front door and
//! the adapters' replies speak of one type. The state machine over these records is
//! `sessions/` (ARCHITECTURE.md, the session state machine).

use crate::error_code::{Code, WharfError};
use serde::Serialize;
use serde_json::Value;

/// One session as the store keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    /// Session id.
    pub id: String,
    /// The tenant (never shown to other tenants).
    #[serde(skip)]
    pub tenant: String,
    /// Backend name.
    pub backend: String,
    /// Caller's key.
    pub key: String,
    /// Lifecycle state.
    pub state: SessionState,
    /// Session data from `initialize`, updated by tools.
    pub data: Value,
    /// Owner claim.
    pub owner: Option<String>,
    /// Current holder.
    pub holder: Option<String>,
    /// When the holder's claim runs out, ms.
    pub holder_until_ms: u64,
    /// Version of the backend that created it.
    pub plugin_version: String,
    /// Node holding the lease (while creating or releasing) or that created it.
    pub node: String,
    /// End of the lease, ms.
    pub lease_until_ms: u64,
    /// Creation time, ms.
    pub created_at_ms: u64,
    /// Last call or refresh, ms.
    pub last_activity_ms: u64,
    /// Idle TTL in s; 0 = none.
    pub idle_ttl_seconds: u64,
    /// Hard end, ms. It bounds running time: a resume pushes it on by the time the
    /// session spent paused.
    pub max_expires_at_ms: Option<u64>,
    /// While paused or archived: when it ends unless resumed, ms (`None`: never).
    pub paused_until_ms: Option<u64>,
    /// The snapshot its sandbox was archived to (`on_idle = "snapshot"`): set while
    /// archived, and kept after a restore while its sandbox runs from that image.
    pub archive: Option<String>,
    /// Bumped on every change.
    pub generation: u64,
}

impl SessionRecord {
    /// When the session expires if nothing touches it (a paused or archived one, when
    /// that lifetime runs out: its idle TTL and running lifetime do not run meanwhile).
    pub fn expires_at_ms(&self) -> Option<u64> {
        if matches!(self.state, SessionState::Paused | SessionState::Archived) {
            return self.paused_until_ms;
        }
        let idle = (self.idle_ttl_seconds > 0)
            .then(|| crate::bounded::after_seconds(self.last_activity_ms, self.idle_ttl_seconds));
        match (idle, self.max_expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Refuses (4090) a paused or archived session, for what cannot resume it on the
    /// caller's behalf; `then` says what the caller should do after resuming.
    pub fn refuse_if_suspended(&self, then: impl std::fmt::Display) -> Result<(), WharfError> {
        if matches!(self.state, SessionState::Paused | SessionState::Archived) {
            return Err(WharfError::new(
                Code::Conflict,
                format!("session `{}` is {}: {then}", self.id, self.state.as_str()),
            ));
        }
        Ok(())
    }
}

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionState {
    /// A node is running `initialize` under a lease.
    Creating,
    /// Usable.
    Ready,
    /// Its sandbox is frozen (memory and processes kept); a call resumes it.
    Paused,
    /// Its sandbox was snapshotted and destroyed (files kept, memory and processes not);
    /// a call restores it from the snapshot.
    Archived,
    /// Cleanup is running.
    Releasing,
}

impl SessionState {
    /// The state as the store writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Creating => "creating",
            SessionState::Ready => "ready",
            SessionState::Paused => "paused",
            SessionState::Archived => "archived",
            SessionState::Releasing => "releasing",
        }
    }
    /// The state a stored name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "creating" => Some(SessionState::Creating),
            "ready" => Some(SessionState::Ready),
            "paused" => Some(SessionState::Paused),
            "archived" => Some(SessionState::Archived),
            "releasing" => Some(SessionState::Releasing),
            _ => None,
        }
    }
}

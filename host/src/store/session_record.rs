//! One session as the store keeps it (its row, decoded). The session state machine over
//! these rows is `sessions/` (ARCHITECTURE.md, the session state machine).

use super::SessionState;
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
    /// Hard end, ms.
    pub max_expires_at_ms: Option<u64>,
    /// Bumped on every change.
    pub generation: u64,
}

impl SessionRecord {
    /// When the session expires if nothing touches it.
    pub fn expires_at_ms(&self) -> Option<u64> {
        let idle = (self.idle_ttl_seconds > 0)
            .then(|| crate::bounded::after_seconds(self.last_activity_ms, self.idle_ttl_seconds));
        match (idle, self.max_expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

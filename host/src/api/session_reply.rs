//! A session as the REST routes show it: the reply type `/openapi.json` documents.

use crate::session_record::{SessionRecord, SessionState};
use serde::Serialize;
use serde_json::Value;

/// One session.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SessionReply {
    /// Session id.
    pub id: String,
    /// Backend name.
    pub backend: String,
    /// The caller's key: the same key gives the same session.
    pub key: String,
    /// Session data from the backend's `initialize`, updated by its tools.
    pub data: Value,
    /// Owner claim.
    pub owner: Option<String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// Last call or refresh, ms since the Unix epoch.
    pub last_activity_ms: u64,
    /// Idle TTL in s; 0 = none.
    pub idle_ttl_seconds: u64,
    /// When the session expires if nothing touches it (none: never).
    pub expires_at_ms: Option<u64>,
    /// Where the session is in its life.
    pub state: SessionState,
    /// Current holder.
    pub holder: Option<String>,
    /// Bumped on every change.
    pub generation: u64,
    /// Whether this request made the session (acquire only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Whether this request resumed a paused session or restored an archived one (resume
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    /// While paused or archived: when the session ends unless resumed, ms since the Unix
    /// epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<u64>,
    /// The snapshot the session was archived to (while archived, and while its restored
    /// sandbox runs from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
}

impl From<&SessionRecord> for SessionReply {
    fn from(s: &SessionRecord) -> Self {
        Self {
            id: s.id.clone(),
            backend: s.backend.clone(),
            key: s.key.clone(),
            data: s.data.clone(),
            owner: s.owner.clone(),
            created_at_ms: s.created_at_ms,
            last_activity_ms: s.last_activity_ms,
            idle_ttl_seconds: s.idle_ttl_seconds,
            expires_at_ms: s.expires_at_ms(),
            state: s.state,
            holder: s.holder.clone(),
            generation: s.generation,
            created: None,
            resumed: None,
            paused_until_ms: s.paused_until_ms,
            archive: s.archive.clone(),
        }
    }
}

/// The caller's sessions.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SessionList {
    /// The sessions the caller sees.
    pub sessions: Vec<SessionReply>,
}

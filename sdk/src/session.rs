//! The session a hook or tool runs in.

use crate::bindings::wit_types;
use serde_json::Value;

/// A session as the host stores it: identity plus the JSON data `initialize` returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The host's session id.
    pub id: String,
    /// The caller's key (a thread or worker id).
    pub key: String,
    /// The session data, as last stored by the host.
    pub data: Value,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// When the session expires, ms since the Unix epoch, if it does.
    pub expires_at_ms: Option<u64>,
}

impl Session {
    /// Deserializes the session data into a typed struct.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::ToolError> {
        serde_json::from_value(self.data.clone()).map_err(|e| {
            crate::ToolError::execution(format!("session data does not match this backend: {e}"))
        })
    }
}

impl From<wit_types::SessionInfo> for Session {
    fn from(info: wit_types::SessionInfo) -> Self {
        Self {
            id: info.id,
            key: info.key,
            data: serde_json::from_str(&info.data).unwrap_or(Value::Null),
            created_at_ms: info.created_at_ms,
            expires_at_ms: info.expires_at_ms,
        }
    }
}

impl From<&Session> for wit_types::SessionInfo {
    fn from(s: &Session) -> Self {
        Self {
            id: s.id.clone(),
            key: s.key.clone(),
            data: s.data.to_string(),
            created_at_ms: s.created_at_ms,
            expires_at_ms: s.expires_at_ms,
        }
    }
}

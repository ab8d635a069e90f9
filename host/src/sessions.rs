//! Sessions: (tenant, backend, key) → one session with its data, kept in memory. Creation
//! is idempotent by key; calls within one session run one at a time; idle expiry is a timer
//! per session that re-checks the last activity before acting.

use crate::error_code::WharfError;
use crate::runtime::loaded_backend::SessionView;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Who a session belongs to and what it is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionIdentity {
    /// The token (tenant) that made it.
    pub tenant: String,
    /// The backend's name.
    pub backend: String,
    /// The caller's key (thread or worker id).
    pub key: String,
}

/// One session as the host keeps it.
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
    /// Session data from `initialize`, updated by tools.
    pub data: Value,
    /// Owner claim.
    pub owner: Option<String>,
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
        let idle = (self.idle_ttl_seconds > 0).then(|| self.last_activity_ms + self.idle_ttl_seconds * 1000);
        match (idle, self.max_expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The view handed to the backend.
    pub fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            key: self.key.clone(),
            data: self.data.clone(),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms(),
        }
    }
}

#[derive(Default)]
struct Tables {
    by_id: HashMap<String, SessionRecord>,
    by_identity: HashMap<SessionIdentity, String>,
}

/// The in-memory session table with per-session call locks and per-key creation locks.
#[derive(Default)]
pub struct SessionTable {
    tables: Mutex<Tables>,
    call_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    creation_locks: Mutex<HashMap<SessionIdentity, Arc<tokio::sync::Mutex<()>>>>,
}

fn poisoned() -> WharfError {
    WharfError::internal("session table lock poisoned")
}

impl SessionTable {
    /// The lock that serializes creation for one identity.
    pub fn creation_lock(&self, identity: &SessionIdentity) -> Result<Arc<tokio::sync::Mutex<()>>, WharfError> {
        let mut locks = self.creation_locks.lock().map_err(|_| poisoned())?;
        Ok(locks.entry(identity.clone()).or_default().clone())
    }

    /// Forgets the creation lock of an identity once nobody waits on it.
    pub fn release_creation_lock(&self, identity: &SessionIdentity) {
        if let Ok(mut locks) = self.creation_locks.lock()
            && locks.get(identity).is_some_and(|l| Arc::strong_count(l) == 1)
        {
            locks.remove(identity);
        }
    }

    /// The lock that serializes calls within one session.
    pub fn call_lock(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<()>>, WharfError> {
        let mut locks = self.call_locks.lock().map_err(|_| poisoned())?;
        Ok(locks.entry(id.to_string()).or_default().clone())
    }

    /// The session of an identity, if any.
    pub fn find(&self, identity: &SessionIdentity) -> Result<Option<SessionRecord>, WharfError> {
        let t = self.tables.lock().map_err(|_| poisoned())?;
        Ok(t.by_identity.get(identity).and_then(|id| t.by_id.get(id)).cloned())
    }

    /// A session by id, visible only to its tenant.
    pub fn get(&self, tenant: &str, id: &str) -> Result<SessionRecord, WharfError> {
        let t = self.tables.lock().map_err(|_| poisoned())?;
        t.by_id
            .get(id)
            .filter(|s| s.tenant == tenant)
            .cloned()
            .ok_or_else(|| WharfError::session_not_found(format!("no session `{id}`")))
    }

    /// A session by id, any tenant (for the host's own timers).
    pub fn get_any(&self, id: &str) -> Result<Option<SessionRecord>, WharfError> {
        let t = self.tables.lock().map_err(|_| poisoned())?;
        Ok(t.by_id.get(id).cloned())
    }

    /// Sessions of a tenant, optionally filtered.
    pub fn list(&self, tenant: &str, backend: Option<&str>, key: Option<&str>) -> Result<Vec<SessionRecord>, WharfError> {
        let t = self.tables.lock().map_err(|_| poisoned())?;
        let mut out: Vec<SessionRecord> = t
            .by_id
            .values()
            .filter(|s| s.tenant == tenant)
            .filter(|s| backend.is_none_or(|b| s.backend == b))
            .filter(|s| key.is_none_or(|k| s.key == k))
            .cloned()
            .collect();
        out.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Every session of a backend, all tenants.
    pub fn of_backend(&self, backend: &str) -> Result<Vec<SessionRecord>, WharfError> {
        let t = self.tables.lock().map_err(|_| poisoned())?;
        Ok(t.by_id.values().filter(|s| s.backend == backend).cloned().collect())
    }

    /// Stores a new session.
    pub fn insert(&self, record: SessionRecord) -> Result<(), WharfError> {
        let mut t = self.tables.lock().map_err(|_| poisoned())?;
        let identity = SessionIdentity { tenant: record.tenant.clone(), backend: record.backend.clone(), key: record.key.clone() };
        t.by_identity.insert(identity, record.id.clone());
        t.by_id.insert(record.id.clone(), record);
        Ok(())
    }

    /// Applies `f` to a session and bumps its generation.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut SessionRecord)) -> Result<SessionRecord, WharfError> {
        let mut t = self.tables.lock().map_err(|_| poisoned())?;
        let record = t.by_id.get_mut(id).ok_or_else(|| WharfError::session_not_found(format!("no session `{id}`")))?;
        f(record);
        record.generation += 1;
        Ok(record.clone())
    }

    /// Removes a session.
    pub fn remove(&self, id: &str) -> Result<Option<SessionRecord>, WharfError> {
        let mut t = self.tables.lock().map_err(|_| poisoned())?;
        let removed = t.by_id.remove(id);
        if let Some(r) = &removed {
            let identity = SessionIdentity { tenant: r.tenant.clone(), backend: r.backend.clone(), key: r.key.clone() };
            if t.by_identity.get(&identity).is_some_and(|v| v == id) {
                t.by_identity.remove(&identity);
            }
        }
        drop(t);
        if let Ok(mut locks) = self.call_locks.lock() {
            locks.remove(id);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, tenant: &str, key: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            tenant: tenant.into(),
            backend: "scratchpad".into(),
            key: key.into(),
            data: Value::Null,
            owner: None,
            created_at_ms: 1000,
            last_activity_ms: 1000,
            idle_ttl_seconds: 10,
            max_expires_at_ms: Some(5000),
            generation: 0,
        }
    }

    #[test]
    fn tenants_do_not_see_each_other() {
        let t = SessionTable::default();
        t.insert(record("s1", "a", "k")).unwrap();
        assert!(t.get("a", "s1").is_ok());
        assert_eq!(t.get("b", "s1").unwrap_err().code, crate::error_code::Code::SessionNotFound);
        assert!(t.list("b", None, None).unwrap().is_empty());
        let id = SessionIdentity { tenant: "a".into(), backend: "scratchpad".into(), key: "k".into() };
        assert_eq!(t.find(&id).unwrap().unwrap().id, "s1");
        t.remove("s1").unwrap();
        assert!(t.find(&id).unwrap().is_none());
    }

    #[test]
    fn expiry_is_the_earlier_of_idle_and_max() {
        let r = record("s", "a", "k");
        assert_eq!(r.expires_at_ms(), Some(5000));
        let mut r2 = r.clone();
        r2.max_expires_at_ms = None;
        assert_eq!(r2.expires_at_ms(), Some(11_000));
        r2.idle_ttl_seconds = 0;
        assert_eq!(r2.expires_at_ms(), None);
    }
}

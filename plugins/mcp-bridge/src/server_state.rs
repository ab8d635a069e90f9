//! The shared stdio server's record in the backend's kv (one key per server config): which
//! process serves (container and pid, found again by every instance), who is starting one
//! now (a lease, so that instances do not all start one), and how often it was started
//! lately (the restart backoff). Times are wall-clock ms: instances share them.
//!
//! A session's own server (`"sessions": "per_session"`) keeps the same record in the
//! session's kv ([`load_session`], [`save_session`]): no lease there, since the host runs
//! one call of a session at a time.

use wharf_sdk::host::kv::{self, Scope};
use wharf_sdk::serde_json;
use wharf_sdk::{Deserialize, Serialize, ToolError};

/// A process that lived this long was healthy: the next start is a first start again.
pub const HEALTHY_AFTER_MS: u64 = 300_000;
/// The longest wait between two starts.
pub const MAX_BACKOFF_MS: u64 = 60_000;

/// The published server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The container's full id.
    pub container: String,
    /// The server's pid in it.
    pub pid: u32,
    /// The protocol version its handshake agreed on.
    pub version: String,
    /// When it was started, ms since the epoch.
    pub started_at_ms: u64,
}

/// An instance starting the server now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The starting instance's token.
    pub owner: String,
    /// When the lease ends if the start never finishes, ms since the epoch.
    pub until_ms: u64,
}

/// The kv record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// The server every instance uses, once started.
    #[serde(default)]
    pub server: Option<Published>,
    /// Starts since the server last ran healthily (0: never started).
    #[serde(default)]
    pub starts: u32,
    /// The last start, ms since the epoch.
    #[serde(default)]
    pub last_start_ms: u64,
    /// Who is starting it now.
    #[serde(default)]
    pub starting: Option<Lease>,
}

/// The wait after the `starts`-th start of a streak: 1 s, 2 s, 4 s … 60 s.
pub fn backoff_ms(starts: u32) -> u64 {
    match starts {
        0 => 0,
        n => (1000_u64 << (n - 1).min(16)).min(MAX_BACKOFF_MS),
    }
}

impl ServerRecord {
    fn streak_over(&self, now_ms: u64) -> bool {
        self.starts == 0 || now_ms.saturating_sub(self.last_start_ms) >= HEALTHY_AFTER_MS
    }

    /// How long until the server may be started again; `None` when it may now.
    pub fn backoff_left(&self, now_ms: u64) -> Option<u64> {
        if self.streak_over(now_ms) {
            return None;
        }
        let due = self.last_start_ms.saturating_add(backoff_ms(self.starts));
        (now_ms < due).then(|| due - now_ms)
    }

    /// Whether another instance holds a live lease.
    pub fn leased_to_other(&self, me: &str, now_ms: u64) -> bool {
        self.starting
            .as_ref()
            .is_some_and(|l| l.owner != me && l.until_ms > now_ms)
    }

    /// The record once `me` starts a server now, its lease until `until_ms`.
    pub fn starting_by(&self, me: &str, now_ms: u64, until_ms: u64) -> Self {
        let starts = if self.streak_over(now_ms) {
            1
        } else {
            self.starts.saturating_add(1)
        };
        Self {
            server: None,
            starts,
            last_start_ms: now_ms,
            starting: Some(Lease {
                owner: me.to_string(),
                until_ms,
            }),
        }
    }

    /// The record with `server` published (and no lease).
    pub fn with_server(&self, server: Published) -> Self {
        Self {
            server: Some(server),
            starting: None,
            ..self.clone()
        }
    }

    /// The record without its server.
    pub fn without_server(&self) -> Self {
        Self {
            server: None,
            ..self.clone()
        }
    }

    /// The record without `me`'s lease.
    pub fn released_by(&self, me: &str) -> Self {
        let mut next = self.clone();
        if next.starting.as_ref().is_some_and(|l| l.owner == me) {
            next.starting = None;
        }
        next
    }
}

/// The raw value under `key` (for the compare-and-swap) and the record it holds; a value
/// that is not a record counts as an empty one (it is replaced).
pub fn load(key: &str) -> Result<(Option<Vec<u8>>, ServerRecord), ToolError> {
    let raw = kv::get(Scope::Backend, key)?;
    let record = raw
        .as_deref()
        .and_then(|bytes| serde_json::from_slice(bytes).ok())
        .unwrap_or_default();
    Ok((raw, record))
}

/// Replaces the value under `key` with `next` if it is still `before`; `true` when it was.
pub fn swap(key: &str, before: Option<&[u8]>, next: &ServerRecord) -> Result<bool, ToolError> {
    let bytes = serde_json::to_vec(next)
        .map_err(|e| ToolError::execution(format!("the server record is not JSON: {e}")))?;
    Ok(kv::compare_and_swap(
        Scope::Backend,
        key,
        before,
        Some(&bytes),
    )?)
}

/// The record under `key` in the session's kv; a value that is not a record counts as
/// none. `None` when there is none.
pub fn load_session(key: &str) -> Result<Option<ServerRecord>, ToolError> {
    let raw = kv::get(Scope::Session, key)?;
    Ok(raw
        .as_deref()
        .and_then(|bytes| serde_json::from_slice(bytes).ok()))
}

/// Stores `record` under `key` in the session's kv.
pub fn save_session(key: &str, record: &ServerRecord) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec(record)
        .map_err(|e| ToolError::execution(format!("the server record is not JSON: {e}")))?;
    Ok(kv::set(Scope::Session, key, &bytes)?)
}

/// Changes the record with `change` (`None`: leave it), retried while other instances
/// change it meanwhile; best effort (errors are ignored, at most 8 tries).
pub fn update(key: &str, change: impl Fn(&ServerRecord) -> Option<ServerRecord>) {
    for _ in 0..8 {
        let Ok((raw, record)) = load(key) else { return };
        let Some(next) = change(&record) else { return };
        if swap(key, raw.as_deref(), &next).unwrap_or(true) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute() {
        let waits: Vec<u64> = (0..10).map(backoff_ms).collect();
        assert_eq!(
            waits,
            [
                0, 1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000
            ]
        );
        assert_eq!(backoff_ms(u32::MAX), MAX_BACKOFF_MS);
    }

    #[test]
    fn a_server_that_keeps_exiting_waits_longer_each_time() {
        let t0 = 1_700_000_000_000;
        let first = ServerRecord::default();
        assert_eq!(first.backoff_left(t0), None);
        let r1 = first.starting_by("a", t0, t0 + 30_000);
        assert_eq!((r1.starts, r1.last_start_ms), (1, t0));
        assert!(r1.leased_to_other("b", t0 + 1) && !r1.leased_to_other("a", t0 + 1));
        assert!(!r1.leased_to_other("b", t0 + 30_000));
        let up = r1.with_server(Published {
            container: "c".repeat(64),
            pid: 7,
            version: "2025-06-18".into(),
            started_at_ms: t0,
        });
        assert_eq!(up.starting, None);
        let down = up.without_server();
        assert_eq!(down.backoff_left(t0 + 400), Some(600));
        assert_eq!(down.backoff_left(t0 + 1000), None);
        let r2 = down.starting_by("b", t0 + 1000, t0 + 31_000);
        assert_eq!(r2.starts, 2);
        assert_eq!(r2.backoff_left(t0 + 1500), Some(1500));
        let r3 = r2.starting_by("b", t0 + 3000, 0);
        assert_eq!(r3.backoff_left(t0 + 3000), Some(4000));
        // Five healthy minutes after its last start, the streak is over.
        let later = t0 + 3000 + HEALTHY_AFTER_MS;
        assert_eq!(r3.backoff_left(later), None);
        assert_eq!(r3.starting_by("c", later, later).starts, 1);
    }

    #[test]
    fn leases_are_released_only_by_their_owner_and_records_round_trip() {
        let r = ServerRecord::default().starting_by("a", 10, 20);
        assert_eq!(r.released_by("b"), r);
        assert_eq!(r.released_by("a").starting, None);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<ServerRecord>(&json).unwrap(), r);
        let old: ServerRecord = serde_json::from_str("{}").unwrap();
        assert_eq!(old, ServerRecord::default());
    }
}

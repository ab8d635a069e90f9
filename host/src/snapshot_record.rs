//! One snapshot as the host knows it: a session's sandbox filesystem committed to a local
//! image (issue 37), owned by the tenant that made it. A leaf shared by the store, the front
//! door and the adapters' replies.

use serde::Serialize;

/// One snapshot.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SnapshotRecord {
    /// Snapshot id (`snap_…`).
    pub id: String,
    /// The tenant that made it (never shown to other tenants).
    #[serde(skip)]
    pub tenant: String,
    /// The backend whose session it was made of; sessions from it are that backend's.
    pub backend: String,
    /// The caller's name for it.
    pub name: String,
    /// The local image it is (`wharf-snapshot:<id>`).
    pub image: String,
    /// The session it was made of.
    pub origin_session: String,
    /// Bytes it adds to its base image.
    pub bytes: u64,
    /// `making` while its commit runs, then `ready`.
    pub state: String,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
}

/// The longest name a caller may give a snapshot.
pub const MAX_SNAPSHOT_NAME_BYTES: usize = 128;

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
    pub state: SnapshotState,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// The session this snapshot archives (`on_idle = "snapshot"`): the host made it and
    /// removes it with the session; it cannot be deleted while the session needs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_of: Option<String>,
}

/// Where a snapshot is in its making.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotState {
    /// Its commit runs (or ran on a node that died: the sweeper removes it).
    Making,
    /// Its image exists; sessions may start from it.
    Ready,
}

impl SnapshotState {
    /// The word stored in its row.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotState::Making => "making",
            SnapshotState::Ready => "ready",
        }
    }

    /// The state a row's word names.
    pub fn parse(word: &str) -> Option<Self> {
        [SnapshotState::Making, SnapshotState::Ready]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// The longest name a caller may give a snapshot.
pub const MAX_SNAPSHOT_NAME_BYTES: usize = 128;

//! One named volume as the host knows it (issue 37): storage a tenant's sessions mount by
//! name, kept by the container engine under a name of the host's choosing, outliving every
//! session. A leaf shared by the store, the front door and the adapters' replies.

use serde::Serialize;

/// One volume.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VolumeRecord {
    /// Volume id (`vol_…`).
    pub id: String,
    /// The tenant it belongs to (never shown to other tenants).
    #[serde(skip)]
    pub tenant: String,
    /// The tenant's name for it, unique within the tenant; sessions mount it by this name.
    pub name: String,
    /// Whether sandboxes of several sessions may mount it at once (otherwise one at a
    /// time: a second is refused with 4090 while the first sandbox lives).
    pub shared: bool,
    /// The engine's volume it is (`wharf-vol-…`), never chosen by a caller.
    #[serde(skip)]
    pub engine_volume: String,
    /// Bytes its files held when the host last measured them.
    pub bytes: u64,
    /// When the host last measured it, ms since the Unix epoch (0: not yet).
    pub measured_at_ms: u64,
    /// `making` while the engine creates it, then `ready`.
    pub state: VolumeState,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
}

/// Where a volume is in its making.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeState {
    /// The engine is creating it (or was, on a node that died: the sweeper removes it).
    Making,
    /// It exists; sessions may mount it.
    Ready,
}

impl VolumeState {
    /// The word stored in its row.
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeState::Making => "making",
            VolumeState::Ready => "ready",
        }
    }

    /// The state a row's word names.
    pub fn parse(word: &str) -> Option<Self> {
        [VolumeState::Making, VolumeState::Ready]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// The longest name a tenant may give a volume.
pub const MAX_VOLUME_NAME_BYTES: usize = 64;

/// Whether `name` is a volume name: 1 to 64 bytes of ASCII letters, digits, `-`, `_` and
/// `.`, starting with a letter or digit (so it is safe in a path, a log line and a label).
pub fn is_volume_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_VOLUME_NAME_BYTES
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_words() {
        for good in ["data", "repo-cache", "a.b_c", "9lives"] {
            assert!(is_volume_name(good), "{good}");
        }
        let long = "a".repeat(MAX_VOLUME_NAME_BYTES + 1);
        for bad in ["", "-x", ".hidden", "a/b", "../x", "a b", "é", "x\0", &long] {
            assert!(!is_volume_name(bad), "{bad:?}");
        }
        assert!(is_volume_name(&"a".repeat(MAX_VOLUME_NAME_BYTES)));
    }
}

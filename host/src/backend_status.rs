//! What the host remembers of a backend's hot loads, as the front door shows it: the last
//! refusal of a component and an upgrade waiting for approval. Shared names, kept in a leaf
//! (the registry keeps them, adapters show them).

use crate::policy::GrantsAdded;
use crate::requires::Requires;
use serde::Serialize;

/// Why a component was refused.
#[derive(Debug, Clone, Serialize)]
pub struct Rejection {
    /// What went wrong, for people.
    pub reason: String,
    /// sha256 of the refused `.wasm`.
    pub sha256: String,
    /// When, in ms since the epoch.
    pub at_ms: u64,
}

/// An upgrade held until an admin approves it, because it declares more than the
/// running version, or its operator's grants reach further than the running version's.
#[derive(Debug, Clone, Serialize)]
pub struct PendingUpgrade {
    /// The waiting version.
    pub version: String,
    /// The component's own name.
    pub declared_name: String,
    /// sha256 of its `.wasm`.
    pub sha256: String,
    /// What it declares beyond the running version.
    pub added: Requires,
    /// Everything it declares.
    pub requires: Requires,
    /// What its grants (`[backends.NAME.grants]`) allow beyond the running version's:
    /// grant → entries added, ceilings raised (`"4096 (was 2048)"`), secret names.
    pub grants_added: GrantsAdded,
    /// When it arrived, in ms since the epoch.
    pub since_ms: u64,
}

//! The example backends built from `plugins/` and the sandbox agent built from
//! `sandboxd/`, embedded at compile time.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
include!(concat!(env!("OUT_DIR"), "/sandbox_agent.rs"));

/// The backends `wharf serve` loads when there is no config: every bundled one except the
/// test-only `misbehaving`.
pub const DEFAULT_BACKENDS: &[&str] = &["echo", "text-index", "scratchpad"];

/// The bytes of a bundled backend.
pub fn wasm(name: &str) -> Option<&'static [u8]> {
    BUNDLED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// Names of the bundled backends.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(n, _)| *n)
}

//! Numbers that cross a boundary (a request body, a stored row): bounded where they enter
//! and combined with saturating arithmetic, so no value a client or a damaged store sends
//! can overflow, wrap or panic the host. Pure.

use serde::de::{Deserializer, Error as _, Unexpected};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Longest idle TTL a request may ask for, in seconds (about ten years). A larger value is
/// refused with 4004, never clamped: a client asking for more is confused, not served.
pub const MAX_TTL_SECONDS: u64 = 10 * 366 * 24 * 3600;

/// The largest component the host reads, bytes: a plugins-directory `.wasm` or an OCI
/// layer.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// The largest session data a backend may keep in one session, bytes of JSON: the data is
/// stored in the session's row, cached on every node that sees it and sent with every
/// listing, so its size is the host's to bound, not the guest's.
pub const MAX_SESSION_DATA_BYTES: usize = 64 * 1024;

/// Latest instant, in ms since the epoch, a stored row may carry (the end of year 9999).
pub const MAX_TIMESTAMP_MS: u64 = 253_402_300_799_999;

const TTL_EXPECTED: &str = "an idle TTL in seconds from 0 to 316224000 (ten years)";

/// An idle TTL in seconds, `0..=MAX_TTL_SECONDS`; 0 means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct TtlSeconds(u64);

impl TtlSeconds {
    /// The TTL, or `None` when it is over [`MAX_TTL_SECONDS`].
    pub fn new(seconds: u64) -> Option<Self> {
        (seconds <= MAX_TTL_SECONDS).then_some(Self(seconds))
    }

    /// A TTL from a trusted source (the operator's config), saturated at the bound.
    pub fn saturating(seconds: u64) -> Self {
        Self(seconds.min(MAX_TTL_SECONDS))
    }

    /// The seconds.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for TtlSeconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let seconds = u64::deserialize(deserializer)?;
        Self::new(seconds)
            .ok_or_else(|| D::Error::invalid_value(Unexpected::Unsigned(seconds), &TTL_EXPECTED))
    }
}

impl schemars::JsonSchema for TtlSeconds {
    fn schema_name() -> Cow<'static, str> {
        "TtlSeconds".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_TTL_SECONDS,
        })
    }
}

/// Default of `[server] max_guest_buffer_bytes`: 16 MiB.
pub const DEFAULT_GUEST_BUFFER_BYTES: u64 = 16 << 20;

/// The host's cap on a size a guest chooses and the host buffers before the guest sees it
/// (an exec's output per stream, a file copied out of a container). What a guest asks for
/// beyond it is clamped to it, never honoured and never refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestBufferCap(pub u64);

impl Default for GuestBufferCap {
    fn default() -> Self {
        Self(DEFAULT_GUEST_BUFFER_BYTES)
    }
}

impl GuestBufferCap {
    /// `requested`, clamped to the cap.
    pub fn clamp(self, requested: u64) -> u64 {
        requested.min(self.0)
    }
}

/// `ms` plus `seconds`, in ms, saturating at `u64::MAX` (which reads as "never").
pub fn after_seconds(ms: u64, seconds: u64) -> u64 {
    ms.saturating_add(seconds.saturating_mul(1000))
}

/// A count or instant for a signed 64-bit store column, saturated at `i64::MAX`.
pub fn to_column(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored column read back: `None` when it is negative or past `max`.
pub fn from_column(value: i64, max: u64) -> Option<u64> {
    u64::try_from(value).ok().filter(|v| *v <= max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_past_the_bound_is_refused_as_an_invalid_value() {
        let err = serde_json::from_str::<TtlSeconds>("18446744073709551").unwrap_err();
        assert!(err.to_string().starts_with("invalid value"), "{err}");
        for hostile in ["-1", "1e30", "18446744073709551616", "\"5\"", "1.5"] {
            assert!(
                serde_json::from_str::<TtlSeconds>(hostile).is_err(),
                "{hostile}"
            );
        }
        assert_eq!(
            serde_json::from_str::<TtlSeconds>("316224000")
                .unwrap()
                .get(),
            MAX_TTL_SECONDS
        );
        assert_eq!(TtlSeconds::saturating(u64::MAX).get(), MAX_TTL_SECONDS);
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(after_seconds(u64::MAX - 1, 1), u64::MAX);
        assert_eq!(after_seconds(1, u64::MAX), u64::MAX);
        assert_eq!(after_seconds(1000, 2), 3000);
        assert_eq!(to_column(u64::MAX), i64::MAX);
        assert_eq!(to_column(7), 7);
        assert_eq!(from_column(-1, u64::MAX), None);
        assert_eq!(from_column(5, 4), None);
        assert_eq!(from_column(4, 4), Some(4));
        assert_eq!(GuestBufferCap(10).clamp(u64::MAX), 10);
        assert_eq!(GuestBufferCap(10).clamp(3), 3);
    }
}

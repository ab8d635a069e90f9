//! `[server.connections]`: what the listener and the MCP transport may hold for callers
//! before any of them has authenticated — open connections (in all and per peer address),
//! the time a connection may take to send its request headers or sit idle between
//! requests, and live MCP sessions (in all and per token). Every value has a finite
//! default, so a host with no such table is still bounded (SECURITY.md, "Resource ledger").

use anyhow::{Result, bail};
use serde::Deserialize;
use std::time::Duration;

/// `[server.connections]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Open HTTP connections at once, all peers together; one more is answered 503 and
    /// closed.
    pub max: usize,
    /// Open HTTP connections at once from one peer address.
    pub max_per_peer: usize,
    /// How long a connection may take to send a whole request head, and how long it may
    /// sit idle between two requests, in ms; then it is closed.
    pub header_read_timeout_ms: u64,
    /// Live MCP sessions at once, all tokens together; past it the oldest idle one is
    /// ended to make room.
    pub max_mcp_sessions: usize,
    /// Live MCP sessions one token (or the anonymous caller) may hold; past it its own
    /// oldest idle one is ended.
    pub max_mcp_sessions_per_token: usize,
    /// An MCP session that sees no request for this long is ended, in s.
    pub mcp_session_idle_seconds: u64,
    /// Tools in one page of MCP `tools/list` (the rest follow a cursor).
    pub mcp_tools_page_size: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max: 512,
            max_per_peer: 256,
            header_read_timeout_ms: 30_000,
            max_mcp_sessions: 1024,
            max_mcp_sessions_per_token: 256,
            mcp_session_idle_seconds: 300,
            mcp_tools_page_size: 1000,
        }
    }
}

impl ConnectionLimits {
    /// The header-read (and keep-alive idle) timeout.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The MCP session idle timeout.
    pub fn mcp_session_idle(&self) -> Duration {
        Duration::from_secs(self.mcp_session_idle_seconds)
    }

    /// Refuses zero caps, a per-peer or per-token cap above the total, and timeouts out of
    /// range.
    pub fn validate(&self) -> Result<()> {
        let at = "server.connections";
        for (key, value) in [
            ("max", self.max),
            ("max_per_peer", self.max_per_peer),
            ("max_mcp_sessions", self.max_mcp_sessions),
            (
                "max_mcp_sessions_per_token",
                self.max_mcp_sessions_per_token,
            ),
            ("mcp_tools_page_size", self.mcp_tools_page_size),
        ] {
            if value == 0 {
                bail!("{at}.{key} = 0: must be at least 1");
            }
        }
        if self.mcp_tools_page_size > 10_000 {
            bail!(
                "{at}.mcp_tools_page_size = {}: must be at most 10000",
                self.mcp_tools_page_size
            );
        }
        if self.max > 1_000_000 {
            bail!("{at}.max = {}: must be at most 1000000", self.max);
        }
        if self.max_per_peer > self.max {
            bail!(
                "{at}.max_per_peer = {} is above max = {}",
                self.max_per_peer,
                self.max
            );
        }
        if self.max_mcp_sessions_per_token > self.max_mcp_sessions {
            bail!(
                "{at}.max_mcp_sessions_per_token = {} is above max_mcp_sessions = {}",
                self.max_mcp_sessions_per_token,
                self.max_mcp_sessions
            );
        }
        if !(100..=3_600_000).contains(&self.header_read_timeout_ms) {
            bail!(
                "{at}.header_read_timeout_ms = {}: must be between 100 and 3600000",
                self.header_read_timeout_ms
            );
        }
        if !(1..=86_400).contains(&self.mcp_session_idle_seconds) {
            bail!(
                "{at}.mcp_session_idle_seconds = {}: must be between 1 and 86400",
                self.mcp_session_idle_seconds
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_finite_and_valid() {
        let d = ConnectionLimits::default();
        d.validate().unwrap();
        assert!(d.max_per_peer <= d.max);
    }

    #[test]
    fn crossing_or_zero_caps_are_refused() {
        let zero = ConnectionLimits {
            max: 0,
            ..ConnectionLimits::default()
        };
        assert!(zero.validate().unwrap_err().to_string().contains("max = 0"));
        let crossing = ConnectionLimits {
            max: 10,
            max_per_peer: 11,
            ..ConnectionLimits::default()
        };
        assert!(crossing.validate().is_err());
        let slow = ConnectionLimits {
            header_read_timeout_ms: 0,
            ..ConnectionLimits::default()
        };
        assert!(slow.validate().is_err());
    }
}

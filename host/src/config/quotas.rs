//! `[quotas]`: what one tenant (a token) may take. Defaults under `[quotas.default]`,
//! overridden per backend (`[quotas.backends.NAME]`) and per token
//! (`[quotas.tokens.NAME]`); a token's value wins over a backend's, which wins over the
//! default. An absent limit is no limit. Checked at start-up: a negative number, an
//! unknown token or bounds that cross fail with the key that is wrong.

use anyhow::{Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The longest `pool_reserve_ms` an operator may set.
pub const MAX_POOL_RESERVE_MS: i64 = 60_000;

/// `[quotas]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QuotaConfig {
    /// Limits for every tenant.
    pub default: QuotaLimits,
    /// Overrides per token name.
    pub tokens: BTreeMap<String, QuotaLimits>,
    /// Overrides per backend name (for every tenant's calls into that backend).
    pub backends: BTreeMap<String, QuotaLimits>,
}

/// One set of limits; `None` inherits (and, at the end, means no limit).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QuotaLimits {
    /// Sustained tool calls per second (token bucket refill).
    pub calls_per_second: Option<i64>,
    /// Calls allowed at once above the sustained rate (bucket size); `calls_per_second`
    /// when absent.
    pub burst: Option<i64>,
    /// Tool calls in progress at once.
    pub concurrent_calls: Option<i64>,
    /// Open sessions (counted cluster-wide through the state store).
    pub sessions: Option<i64>,
    /// Containers the tenant's sessions may hold.
    pub containers: Option<i64>,
    /// Snapshots the tenant may keep (default 32).
    pub snapshots: Option<i64>,
    /// Bytes the tenant's snapshots may add to their base images, together (default 16 GiB).
    pub snapshot_bytes: Option<i64>,
    /// Sessions the tenant may have paused at once (unlimited when unset; each backend's
    /// `max_paused` holds as well).
    pub paused_sessions: Option<i64>,
    /// Sessions the tenant may have archived at once (unlimited when unset; each
    /// backend's `max_archived` holds as well).
    pub archived_sessions: Option<i64>,
    /// Named volumes the tenant may keep (default 16).
    pub volumes: Option<i64>,
    /// Bytes the tenant's volumes may hold, together, as the host measures them (default
    /// 16 GiB).
    pub volume_bytes: Option<i64>,
    /// Shortest idle TTL a caller may ask for, in s.
    pub min_ttl_seconds: Option<i64>,
    /// Longest idle TTL a caller may ask for, in s (also what `ttl_seconds: 0` becomes).
    pub max_ttl_seconds: Option<i64>,
    /// Hard lifetime of a session, in s, when the backend sets none (or a longer one).
    pub max_lifetime_seconds: Option<i64>,
    /// Most actions in one compatibility batch.
    pub batch_size: Option<i64>,
    /// Percent of a backend's `pool_max` one tenant may hold while others wait (1–100).
    pub pool_share_percent: Option<i64>,
    /// For how long, in ms, after another tenant's last call into a backend one free
    /// instance of its pool stays held back for it from a tenant past its share (0–60000;
    /// 0 turns the reserve off).
    pub pool_reserve_ms: Option<i64>,
}

impl QuotaLimits {
    /// `self` where set, else `fallback`.
    pub fn or(&self, fallback: &QuotaLimits) -> QuotaLimits {
        QuotaLimits {
            calls_per_second: self.calls_per_second.or(fallback.calls_per_second),
            burst: self.burst.or(fallback.burst),
            concurrent_calls: self.concurrent_calls.or(fallback.concurrent_calls),
            sessions: self.sessions.or(fallback.sessions),
            containers: self.containers.or(fallback.containers),
            snapshots: self.snapshots.or(fallback.snapshots),
            snapshot_bytes: self.snapshot_bytes.or(fallback.snapshot_bytes),
            paused_sessions: self.paused_sessions.or(fallback.paused_sessions),
            archived_sessions: self.archived_sessions.or(fallback.archived_sessions),
            volumes: self.volumes.or(fallback.volumes),
            volume_bytes: self.volume_bytes.or(fallback.volume_bytes),
            min_ttl_seconds: self.min_ttl_seconds.or(fallback.min_ttl_seconds),
            max_ttl_seconds: self.max_ttl_seconds.or(fallback.max_ttl_seconds),
            max_lifetime_seconds: self.max_lifetime_seconds.or(fallback.max_lifetime_seconds),
            batch_size: self.batch_size.or(fallback.batch_size),
            pool_share_percent: self.pool_share_percent.or(fallback.pool_share_percent),
            pool_reserve_ms: self.pool_reserve_ms.or(fallback.pool_reserve_ms),
        }
    }

    fn validate(&self, at: &str) -> Result<()> {
        let fields = [
            ("calls_per_second", self.calls_per_second, 1),
            ("burst", self.burst, 1),
            ("concurrent_calls", self.concurrent_calls, 1),
            ("sessions", self.sessions, 0),
            ("containers", self.containers, 0),
            ("snapshots", self.snapshots, 0),
            ("snapshot_bytes", self.snapshot_bytes, 0),
            ("paused_sessions", self.paused_sessions, 0),
            ("archived_sessions", self.archived_sessions, 0),
            ("volumes", self.volumes, 0),
            ("volume_bytes", self.volume_bytes, 0),
            ("min_ttl_seconds", self.min_ttl_seconds, 0),
            ("max_ttl_seconds", self.max_ttl_seconds, 1),
            ("max_lifetime_seconds", self.max_lifetime_seconds, 1),
            ("batch_size", self.batch_size, 1),
            ("pool_share_percent", self.pool_share_percent, 1),
            ("pool_reserve_ms", self.pool_reserve_ms, 0),
        ];
        for (key, value, least) in fields {
            if let Some(v) = value
                && v < least
            {
                bail!("{at}.{key} = {v}: must be at least {least}");
            }
        }
        for (key, value) in [
            ("calls_per_second", self.calls_per_second),
            ("burst", self.burst),
        ] {
            if let Some(v) = value
                && v > i64::from(u32::MAX)
            {
                bail!("{at}.{key} = {v}: must be at most {}", u32::MAX);
            }
        }
        if let Some(v) = self.pool_share_percent
            && v > 100
        {
            bail!("{at}.pool_share_percent = {v}: must be at most 100");
        }
        if let Some(v) = self.pool_reserve_ms
            && v > MAX_POOL_RESERVE_MS
        {
            bail!("{at}.pool_reserve_ms = {v}: must be at most {MAX_POOL_RESERVE_MS}");
        }
        if let (Some(min), Some(max)) = (self.min_ttl_seconds, self.max_ttl_seconds)
            && min > max
        {
            bail!("{at}: min_ttl_seconds = {min} is above max_ttl_seconds = {max}");
        }
        Ok(())
    }
}

impl QuotaConfig {
    /// Refuses negative or crossing limits and overrides for tokens that do not exist.
    pub fn validate<'a>(
        &self,
        tokens: impl Iterator<Item = &'a str> + Clone,
        oauth_tenants: bool,
    ) -> Result<()> {
        self.default.validate("quotas.default")?;
        for (name, limits) in &self.tokens {
            // With `[auth.oauth]`, tenants also come from token claims, unknown until then.
            if !oauth_tenants && name != "anonymous" && !tokens.clone().any(|t| t == name) {
                bail!(
                    "quotas.tokens.{name}: there is no token named `{name}` (quotas are set per [[auth.tokens]] name)"
                );
            }
            limits.validate(&format!("quotas.tokens.{name}"))?;
            limits
                .or(&self.default)
                .validate(&format!("quotas.tokens.{name} (with the defaults)"))?;
        }
        for (name, limits) in &self.backends {
            limits.validate(&format!("quotas.backends.{name}"))?;
            limits
                .or(&self.default)
                .validate(&format!("quotas.backends.{name} (with the defaults)"))?;
        }
        Ok(())
    }

    /// Whether any limit is set at all (no work on the call path otherwise).
    pub fn is_empty(&self) -> bool {
        *self == QuotaConfig::default()
    }
}

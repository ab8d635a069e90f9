//! The limits that hold for one tenant's use of one backend, resolved from `[quotas]`: a
//! token's override, else the backend's, else the default. A limit set by the backend's
//! table is counted per (tenant, backend); one set by the token or the default is counted
//! across every backend of the tenant.

use crate::config::{QuotaConfig, QuotaLimits};
use serde::Serialize;

/// Where a limit is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Across every backend the tenant uses.
    Tenant,
    /// For the tenant's use of one backend.
    Backend,
}

/// The share of a pool a tenant may hold while others wait, when nobody says otherwise.
pub const DEFAULT_POOL_SHARE_PERCENT: u64 = 50;

/// How long another tenant's last call keeps an instance held back for it, when nobody
/// says otherwise: long enough to span an agent's pause between sequential calls.
pub const DEFAULT_POOL_RESERVE_MS: u64 = 1_000;

/// The idle-TTL ceiling when `[quotas]` sets none, s (a day): `ttl_seconds: 0` becomes
/// this, so a host with no quotas holds no session forever.
pub const DEFAULT_MAX_TTL_SECONDS: u64 = 86_400;

/// The running-lifetime ceiling of a session when neither `[quotas]` nor the backend sets
/// a shorter one, s (a day).
pub const DEFAULT_MAX_LIFETIME_SECONDS: u64 = 86_400;

/// The most actions in one compatibility batch when `[quotas]` sets no `batch_size`.
pub const DEFAULT_BATCH_SIZE: u64 = 1_000;

/// The snapshots a tenant may keep when `[quotas]` sets no `snapshots`.
pub const DEFAULT_SNAPSHOTS: u64 = 32;

/// The bytes a tenant's snapshots may add, together, when `[quotas]` sets no
/// `snapshot_bytes` (16 GiB).
pub const DEFAULT_SNAPSHOT_BYTES: u64 = 16 << 30;

/// The named volumes a tenant may keep when `[quotas]` sets no `volumes`.
pub const DEFAULT_VOLUMES: u64 = 16;

/// The bytes a tenant's volumes may hold, together, when `[quotas]` sets no
/// `volume_bytes` (16 GiB).
pub const DEFAULT_VOLUME_BYTES: u64 = 16 << 30;

/// Resolved limits; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Effective {
    /// Sustained calls per second and the burst above it, and where they are counted.
    pub calls_per_second: Option<(u32, u32, Scope)>,
    /// Calls in progress at once.
    pub concurrent_calls: Option<(u64, Scope)>,
    /// Open sessions.
    pub sessions: Option<(u64, Scope)>,
    /// Containers.
    pub containers: Option<(u64, Scope)>,
    /// Snapshots kept (always bounded: [`DEFAULT_SNAPSHOTS`] unless set).
    pub snapshots: u64,
    /// Bytes the snapshots add, together ([`DEFAULT_SNAPSHOT_BYTES`] unless set).
    pub snapshot_bytes: u64,
    /// Sessions paused at once.
    pub paused_sessions: Option<u64>,
    /// Sessions archived at once.
    pub archived_sessions: Option<u64>,
    /// Named volumes kept (always bounded: [`DEFAULT_VOLUMES`] unless set).
    pub volumes: u64,
    /// Bytes the volumes hold, together ([`DEFAULT_VOLUME_BYTES`] unless set).
    pub volume_bytes: u64,
    /// Shortest idle TTL a caller may ask for, s.
    pub min_ttl_seconds: Option<u64>,
    /// Longest idle TTL, s.
    pub max_ttl_seconds: Option<u64>,
    /// Hard session lifetime, s.
    pub max_lifetime_seconds: Option<u64>,
    /// Most actions in one compatibility batch.
    pub batch_size: Option<u64>,
    /// Percent of a backend's pool the tenant may hold while others wait.
    pub pool_share_percent: u64,
    /// For how long after another tenant's last call one free instance stays held back for
    /// it from this tenant when past its share, ms (0: no reserve).
    pub pool_reserve_ms: u64,
}

fn count(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

/// The limits of `tenant` on `backend` (`None`: the tenant's own, backend-independent ones).
pub fn resolve(config: &QuotaConfig, tenant: &str, backend: Option<&str>) -> Effective {
    let none = QuotaLimits::default();
    let token = config.tokens.get(tenant).unwrap_or(&none);
    let of_backend = backend
        .and_then(|b| config.backends.get(b))
        .unwrap_or(&none);
    let merged = token.or(&of_backend.or(&config.default));
    let scope = |by_token: Option<i64>, by_backend: Option<i64>| {
        if by_token.is_none() && by_backend.is_some() {
            Scope::Backend
        } else {
            Scope::Tenant
        }
    };
    let rate_scope = scope(
        token.calls_per_second.or(token.burst),
        of_backend.calls_per_second.or(of_backend.burst),
    );
    let u32_of = |v: i64| u32::try_from(v).unwrap_or(u32::MAX).max(1);
    Effective {
        calls_per_second: merged.calls_per_second.map(|rate| {
            let rate = u32_of(rate);
            let burst = merged.burst.map_or(rate, u32_of);
            (rate, burst, rate_scope)
        }),
        concurrent_calls: count(merged.concurrent_calls).map(|n| {
            (
                n,
                scope(token.concurrent_calls, of_backend.concurrent_calls),
            )
        }),
        sessions: count(merged.sessions).map(|n| (n, scope(token.sessions, of_backend.sessions))),
        containers: count(merged.containers)
            .map(|n| (n, scope(token.containers, of_backend.containers))),
        snapshots: count(merged.snapshots).unwrap_or(DEFAULT_SNAPSHOTS),
        snapshot_bytes: count(merged.snapshot_bytes).unwrap_or(DEFAULT_SNAPSHOT_BYTES),
        paused_sessions: count(merged.paused_sessions),
        archived_sessions: count(merged.archived_sessions),
        volumes: count(merged.volumes).unwrap_or(DEFAULT_VOLUMES),
        volume_bytes: count(merged.volume_bytes).unwrap_or(DEFAULT_VOLUME_BYTES),
        min_ttl_seconds: count(merged.min_ttl_seconds),
        max_ttl_seconds: count(merged.max_ttl_seconds).or(Some(DEFAULT_MAX_TTL_SECONDS)),
        max_lifetime_seconds: count(merged.max_lifetime_seconds)
            .or(Some(DEFAULT_MAX_LIFETIME_SECONDS)),
        batch_size: count(merged.batch_size).or(Some(DEFAULT_BATCH_SIZE)),
        pool_share_percent: count(merged.pool_share_percent)
            .unwrap_or(DEFAULT_POOL_SHARE_PERCENT)
            .clamp(1, 100),
        pool_reserve_ms: count(merged.pool_reserve_ms).map_or(DEFAULT_POOL_RESERVE_MS, |ms| {
            ms.min(crate::config::MAX_POOL_RESERVE_MS.unsigned_abs())
        }),
    }
}

impl Effective {
    /// Slots of a pool of `pool_max` the tenant may hold while others wait (at least one).
    pub fn pool_share(&self, pool_max: usize) -> usize {
        let max = u64::try_from(pool_max).unwrap_or(u64::MAX);
        usize::try_from((max.saturating_mul(self.pool_share_percent)).div_ceil(100))
            .unwrap_or(pool_max)
            .max(1)
    }

    /// How the tenant shares a pool of `pool_max` instances with others.
    pub fn fairness(&self, pool_max: usize) -> crate::quotas::Fairness {
        crate::quotas::Fairness {
            share: self.pool_share(pool_max),
            reserve: std::time::Duration::from_millis(self.pool_reserve_ms),
        }
    }

    /// The idle TTL and hard lifetime a session gets: the caller's TTL (or the backend's
    /// default when absent) kept within the operator's bounds (a caller may shorten, never
    /// exceed: `0`, no expiry, becomes the max when one is set); the backend's lifetime,
    /// capped by the quota's.
    pub fn session_lifetimes(
        &self,
        requested_ttl: Option<u64>,
        backend_idle_ttl: u64,
        backend_max_lifetime: u64,
    ) -> (u64, u64) {
        let mut ttl = requested_ttl.unwrap_or(backend_idle_ttl);
        if let Some(max) = self.max_ttl_seconds
            && (ttl == 0 || ttl > max)
        {
            ttl = max;
        }
        if let Some(min) = self.min_ttl_seconds
            && ttl != 0
            && ttl < min
        {
            ttl = min;
        }
        let lifetime = match self.max_lifetime_seconds {
            Some(max) if backend_max_lifetime == 0 || backend_max_lifetime > max => max,
            _ => backend_max_lifetime,
        };
        (ttl, lifetime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> QuotaConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn token_beats_backend_beats_default_and_scopes_follow() {
        let c = config(
            "[default]\ncalls_per_second = 10\nsessions = 3\n[backends.echo]\ncalls_per_second = 2\nburst = 4\n[tokens.vip]\ncalls_per_second = 100\n",
        );
        assert_eq!(
            resolve(&c, "agent", Some("echo")).calls_per_second,
            Some((2, 4, Scope::Backend))
        );
        assert_eq!(
            resolve(&c, "agent", Some("other")).calls_per_second,
            Some((10, 10, Scope::Tenant))
        );
        assert_eq!(
            resolve(&c, "vip", Some("echo")).calls_per_second,
            Some((100, 4, Scope::Tenant))
        );
        assert_eq!(resolve(&c, "vip", None).sessions, Some((3, Scope::Tenant)));
        assert_eq!(resolve(&c, "x", None).pool_share(4), 2);
        assert_eq!(resolve(&c, "x", None).pool_share(1), 1);
        assert_eq!(
            resolve(&c, "x", None).pool_reserve_ms,
            DEFAULT_POOL_RESERVE_MS
        );
        let off = config("[tokens.batch]\npool_reserve_ms = 0\n");
        assert_eq!(resolve(&off, "batch", Some("echo")).pool_reserve_ms, 0);
    }

    #[test]
    fn a_caller_may_shorten_a_session_never_outlive_the_operator() {
        let q = Effective {
            min_ttl_seconds: Some(10),
            max_ttl_seconds: Some(600),
            max_lifetime_seconds: Some(3600),
            ..Effective::default()
        };
        assert_eq!(q.session_lifetimes(Some(0), 1800, 0), (600, 3600));
        assert_eq!(q.session_lifetimes(Some(99_999), 1800, 0), (600, 3600));
        assert_eq!(q.session_lifetimes(Some(60), 1800, 7200), (60, 3600));
        assert_eq!(q.session_lifetimes(Some(1), 1800, 60), (10, 60));
        assert_eq!(q.session_lifetimes(None, 1800, 0), (600, 3600));
        assert_eq!(
            Effective::default().session_lifetimes(Some(0), 1800, 0),
            (0, 0)
        );
    }
}

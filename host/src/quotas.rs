//! Fair multi-tenancy (ARCHITECTURE.md, "Quotas"): what one tenant (a token) may take.
//! Pure policy over counters this node keeps: calls per second (a `governor` token bucket
//! per tenant, per node), calls in progress, the lifetimes a session may ask for, and the
//! share of a backend's pool (`fair_gate`). Counts that must hold cluster-wide (sessions)
//! are checked by the state store (`store/quota_rows`); this module only resolves them.

mod fair_gate;
mod limits;

pub use fair_gate::{FairGate, Fairness, GatePermit, GateRefusal};
pub use limits::{DEFAULT_POOL_SHARE_PERCENT, Effective, Scope};

use crate::config::QuotaConfig;
use crate::error_code::{Code, WharfError};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whose request a pool checkout serves when no tenant's request is (hooks the sweeper
/// runs, releases, warmups).
pub const HOST_TENANT: &str = "(host)";

/// [`HOST_TENANT`] as the `Arc` a call's context holds: made once, so clearing a context
/// at check-in and the host's own calls cost a reference count, not an allocation.
pub fn host_tenant() -> &'static std::sync::Arc<str> {
    static HOST: std::sync::LazyLock<std::sync::Arc<str>> =
        std::sync::LazyLock::new(|| std::sync::Arc::from(HOST_TENANT));
    &HOST
}
/// Whose request an admin token's call is (admins see every tenant; their calls are not
/// held to a tenant's quotas, and queue in the pools under this name).
pub const ADMIN_TENANT: &str = "(admin)";

type Key = (Arc<str>, Option<Arc<str>>);
/// Calls in progress per key.
type InFlight = Arc<Mutex<HashMap<Key, u64>>>;

/// The quotas of a host and the per-node counters behind them.
#[derive(Default)]
pub struct Quotas {
    config: QuotaConfig,
    buckets: Mutex<HashMap<Key, Arc<DefaultDirectRateLimiter>>>,
    in_flight: InFlight,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A call admitted under the concurrency quota: the slot is freed when dropped.
#[derive(Debug, Default)]
pub struct CallAdmission {
    slot: Option<(InFlight, Key)>,
}

impl Drop for CallAdmission {
    fn drop(&mut self) {
        if let Some((counts, key)) = self.slot.take()
            && let Ok(mut counts) = counts.lock()
            && let Some(n) = counts.get_mut(&key)
        {
            *n = n.saturating_sub(1);
        }
    }
}

fn key(tenant: &str, backend: &str, scope: Scope) -> Key {
    let backend = (scope == Scope::Backend).then(|| Arc::from(backend));
    (Arc::from(tenant), backend)
}

/// 4290: `tenant` is past `limit`; `data` names the limit, the use and when it frees.
pub fn over_rate(
    tenant: &str,
    backend: &str,
    limit: &str,
    quota: u64,
    in_use: u64,
    retry_after: Duration,
) -> WharfError {
    let ms = u64::try_from(retry_after.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let what = match limit {
        "calls_per_second" => "calls per second",
        _ => "calls in progress",
    };
    WharfError::new(
        Code::RateLimited,
        format!("tenant `{tenant}` is over its quota of {quota} {what}; retry in {ms} ms"),
    )
    .with_data(json!({
        "limit": limit,
        "quota": quota,
        "in_use": in_use,
        "retry_after_ms": ms,
        "frees_at_ms": crate::clock::now_ms().saturating_add(ms),
        "tenant": tenant,
        "backend": backend,
    }))
}

impl Quotas {
    /// Quotas from `[quotas]`; refuses limits that are negative or cross (tokens are
    /// checked against `[auth]` when the file is parsed).
    pub fn new(config: QuotaConfig) -> anyhow::Result<Self> {
        config.validate(config.tokens.keys().map(String::as_str), false)?;
        Ok(Self {
            config,
            ..Self::default()
        })
    }

    /// Whether any quota is configured.
    pub fn is_active(&self) -> bool {
        !self.config.is_empty()
    }

    /// The limits of `tenant` on `backend` (or its backend-independent ones).
    pub fn limits(&self, tenant: &str, backend: Option<&str>) -> Effective {
        limits::resolve(&self.config, tenant, backend)
    }

    /// Admits one call of `tenant` into `backend`, or 4290 past its concurrency or rate.
    pub fn admit_call(&self, tenant: &str, backend: &str) -> Result<CallAdmission, WharfError> {
        if !self.is_active() || tenant == ADMIN_TENANT {
            return Ok(CallAdmission::default());
        }
        let limits = self.limits(tenant, Some(backend));
        let mut admission = CallAdmission::default();
        if let Some((most, scope)) = limits.concurrent_calls {
            let key = key(tenant, backend, scope);
            let mut counts = self
                .in_flight
                .lock()
                .map_err(|_| WharfError::internal("quota counters poisoned"))?;
            let n = counts.entry(key.clone()).or_default();
            if *n >= most {
                return Err(over_rate(
                    tenant,
                    backend,
                    "concurrent_calls",
                    most,
                    *n,
                    Duration::from_millis(100),
                ));
            }
            *n += 1;
            admission.slot = Some((self.in_flight.clone(), key));
        }
        if let Some((rate, burst, scope)) = limits.calls_per_second {
            let bucket = self.bucket(key(tenant, backend, scope), rate, burst)?;
            if let Err(not_until) = bucket.check() {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                return Err(over_rate(
                    tenant,
                    backend,
                    "calls_per_second",
                    u64::from(rate),
                    u64::from(burst),
                    wait,
                ));
            }
        }
        Ok(admission)
    }

    fn bucket(
        &self,
        key: Key,
        rate: u32,
        burst: u32,
    ) -> Result<Arc<DefaultDirectRateLimiter>, WharfError> {
        let mut buckets = self
            .buckets
            .lock()
            .map_err(|_| WharfError::internal("quota buckets poisoned"))?;
        let bucket = buckets.entry(key).or_insert_with(|| {
            let one = NonZeroU32::MIN;
            let quota = Quota::per_second(NonZeroU32::new(rate).unwrap_or(one))
                .allow_burst(NonZeroU32::new(burst).unwrap_or(one));
            Arc::new(RateLimiter::direct(quota))
        });
        Ok(bucket.clone())
    }

    /// Calls of `tenant` in progress on this node, by backend (`*` for tenant-wide counts).
    fn in_flight_of(&self, tenant: &str) -> Value {
        let counts = self.in_flight.lock().map(|c| c.clone()).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for ((t, backend), n) in counts {
            if &*t == tenant {
                out.insert(backend.as_deref().unwrap_or("*").to_string(), json!(n));
            }
        }
        Value::Object(out)
    }

    /// What `tenant` may take and what it uses (sessions counted by the caller, from the
    /// store), per backend in `backends`.
    pub fn report(&self, tenant: &str, backends: &[String], sessions: u64) -> Value {
        let per_backend: serde_json::Map<String, Value> = backends
            .iter()
            .map(|b| {
                let l = self.limits(tenant, Some(b));
                (b.clone(), json!(l))
            })
            .collect();
        json!({
            "tenant": tenant,
            "limits": self.limits(tenant, None),
            "backends": per_backend,
            "usage": {
                "sessions": sessions,
                "calls_in_progress": self.in_flight_of(tenant),
            },
            "rate_limits_are_per_node": true,
        })
    }

    /// Tenants named in `[quotas.tokens]`.
    pub fn named_tenants(&self) -> impl Iterator<Item = &str> {
        self.config.tokens.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(text: &str) -> Quotas {
        Quotas::new(toml::from_str(text).unwrap()).unwrap()
    }

    #[test]
    fn past_the_burst_a_call_is_refused_with_when_it_frees() {
        let q = quotas("[default]\ncalls_per_second = 1\nburst = 2\n");
        assert!(q.admit_call("a", "echo").is_ok());
        assert!(q.admit_call("a", "echo").is_ok());
        let e = q.admit_call("a", "echo").unwrap_err();
        assert_eq!(e.code, Code::RateLimited);
        let data = e.data.unwrap();
        assert_eq!(data["limit"], "calls_per_second");
        assert!(data["retry_after_ms"].as_u64().unwrap() <= 1000);
        assert!(
            q.admit_call("b", "echo").is_ok(),
            "another tenant has its own bucket"
        );
        assert!(q.admit_call(ADMIN_TENANT, "echo").is_ok());
    }

    #[test]
    fn concurrency_slots_free_when_the_call_ends() {
        let q = quotas("[tokens.a]\nconcurrent_calls = 1\n");
        let first = q.admit_call("a", "echo").unwrap();
        let e = q.admit_call("a", "other").unwrap_err();
        assert_eq!(e.data.unwrap()["limit"], "concurrent_calls");
        drop(first);
        assert!(q.admit_call("a", "echo").is_ok());
    }
}

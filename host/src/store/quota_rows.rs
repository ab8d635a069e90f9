//! Counts that must hold across every node sharing the store (a tenant's open sessions):
//! a new `creating` row is inserted only while the tenant's count is under its quota, and
//! the count and the insert run under a per-tenant lock row (the same leased lock row
//! backends take to count their containers, `backend_locks`), so two nodes racing for the
//! last slot cannot both take it.

use super::{StateStore, unavailable};
use crate::engines::CreateLedger;
use crate::error_code::{Code, WharfError};
use crate::session_record::SessionRecord;
use std::time::{Duration, Instant};

/// How long a quota lock row is held at most (it is given back within one count and one
/// insert).
const LOCK_LEASE_MS: i64 = 5_000;
/// Longest wait for a tenant's quota lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// A count limit checked at insert: `limit` rows, counted for the tenant on `backend` only
/// or (when `None`) across its backends.
#[derive(Debug, Clone)]
pub struct RowQuota {
    /// Most rows.
    pub limit: u64,
    /// Count only this backend's rows.
    pub backend: Option<String>,
}

impl StateStore {
    /// The tenant's session rows (on `backend` only, when given).
    #[tracing::instrument(name = "store.count_sessions", level = "debug", skip_all)]
    pub async fn count_sessions(
        &self,
        tenant: &str,
        backend: Option<&str>,
    ) -> Result<u64, WharfError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM wharf_sessions WHERE tenant = $1 AND ($2 = '' OR backend = $2)",
        )
        .bind(tenant)
        .bind(backend.unwrap_or(""))
        .fetch_one(self.pool())
        .await
        .map_err(unavailable)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// [`StateStore::insert_creating`] within `quota`: false when the identity already has a
    /// row (as there), 4030 naming the quota when the tenant is at it. `node` (alive until
    /// `node_until_ms`) holds the tenant's lock meanwhile.
    #[tracing::instrument(name = "store.insert_creating_within", level = "debug", skip_all)]
    pub async fn insert_creating_within(
        &self,
        r: &SessionRecord,
        quota: &RowQuota,
        node: &str,
        node_until_ms: i64,
    ) -> Result<bool, WharfError> {
        let lock = format!("tenant-sessions:{}", r.tenant);
        let holder = format!("{node}:{}", r.id);
        let began = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            let now = crate::clock::now_ms() as i64;
            // A lock row is free when its node is not alive; this node is, before it locks.
            self.heartbeat(node, node_until_ms.max(now + LOCK_LEASE_MS), now)
                .await?;
            if self
                .try_lock_backend(&lock, &holder, node, now, now + LOCK_LEASE_MS)
                .await?
            {
                break;
            }
            if began.elapsed() >= LOCK_WAIT {
                return Err(WharfError::new(
                    Code::Conflict,
                    format!(
                        "tenant `{}` is creating sessions elsewhere; try again",
                        r.tenant
                    ),
                )
                .retryable(true));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        let outcome = self.count_then_insert(r, quota).await;
        self.unlock_backend(&lock, &holder).await?;
        outcome
    }

    async fn count_then_insert(
        &self,
        r: &SessionRecord,
        quota: &RowQuota,
    ) -> Result<bool, WharfError> {
        let count = self
            .count_sessions(&r.tenant, quota.backend.as_deref())
            .await?;
        if count < quota.limit {
            return self.insert_creating(r).await;
        }
        if self
            .find_session(&r.tenant, &r.backend, &r.key)
            .await?
            .is_some()
        {
            return Ok(false);
        }
        let on = quota
            .backend
            .as_ref()
            .map(|b| format!(" on backend `{b}`"))
            .unwrap_or_default();
        Err(WharfError::forbidden(format!(
            "tenant `{}` is at its quota of {} open sessions{on}; release one (DELETE /v1/sessions/ID) first",
            r.tenant, quota.limit
        ))
        .with_data(serde_json::json!({
            "quota": "sessions",
            "limit": quota.limit,
            "in_use": count,
            "tenant": r.tenant,
            "backend": quota.backend,
        })))
    }
}

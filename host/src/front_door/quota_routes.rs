//! The front door's quota questions: a tenant's limits and use (`GET /v1/quotas`), and the
//! size of a compatibility batch.

use super::Wharf;
use crate::error_code::WharfError;
use crate::tenant::Tenant;
use serde_json::{Value, json};

impl Wharf {
    /// The limits and use of `own` (the caller's tenant), or of every tenant the host knows
    /// (tokens, and tenants with sessions) when `view` is every tenant's (an admin).
    pub async fn quota_report(&self, view: &Tenant, own: &str) -> Result<Value, WharfError> {
        let backends: Vec<String> = self
            .registry
            .backends()
            .iter()
            .map(|b| b.name.to_string())
            .collect();
        let store = self.sessions.store();
        let quotas = &self.services.quotas;
        let tenants: Vec<String> = match view {
            Tenant::Own(name) => vec![name.clone()],
            Tenant::Every => {
                let mut names: std::collections::BTreeSet<String> = self
                    .server
                    .auth
                    .tokens
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                names.extend(quotas.named_tenants().map(str::to_string));
                names.insert(own.to_string());
                for s in store.list_sessions(None, None, None).await? {
                    names.insert(s.tenant);
                }
                names.into_iter().collect()
            }
        };
        let mut reports = Vec::with_capacity(tenants.len());
        for tenant in &tenants {
            let sessions = store.count_sessions(tenant, None).await?;
            let mut report = quotas.report(tenant, &backends, sessions);
            let refused: serde_json::Map<String, Value> = self
                .metrics
                .tenants
                .recent_refusals(tenant)
                .into_iter()
                .map(|(limit, n)| (limit, json!(n)))
                .collect();
            report["refused_last_15_minutes"] = Value::Object(refused);
            reports.push(report);
        }
        Ok(match view {
            Tenant::Own(_) => reports.pop().unwrap_or(Value::Null),
            Tenant::Every => json!({ "tenants": reports }),
        })
    }

    /// 4030 naming the quota when a batch of `actions` is past `tenant`'s batch size.
    pub fn check_batch_size(&self, tenant: &str, actions: usize) -> Result<(), WharfError> {
        let Some(limit) = self.services.quotas.limits(tenant, None).batch_size else {
            return Ok(());
        };
        let size = actions as u64;
        if size <= limit {
            return Ok(());
        }
        self.metrics.tenants.record_refusal(tenant, "batch_size");
        tracing::info!(target: "wharf::audit", event = "quota_refused", tenant, quota = "batch_size", code = 4030);
        Err(WharfError::forbidden(format!(
            "a batch of {size} actions is past tenant `{tenant}`'s quota of {limit} actions per batch; split it"
        ))
        .with_data(json!({ "quota": "batch_size", "limit": limit, "in_use": size, "tenant": tenant })))
    }
}

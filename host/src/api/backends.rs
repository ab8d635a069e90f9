//! What `/v1/backends` shows of the loaded backends (description, pool, limits) and of the
//! lifecycle (`last_error`, `pending`, `rejected`); shared by the REST and admin routes.

use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::route_answer::answer;
use crate::config::TokenScope;
use crate::front_door::{BackendSummary, Wharf};
use axum::extract::State;
use serde_json::{Value, json};
use std::sync::Arc;

/// What `/v1/backends` shows of a backend.
pub fn backend_json(b: &BackendSummary) -> Value {
    let limits = &b.limits;
    json!({
        "name": b.name,
        "declared_name": b.declared_name,
        "version": b.version,
        "description": b.description,
        "world": b.world,
        "wit": b.wit,
        "state": "ready",
        "sha256": b.sha256,
        "tools": b.tools.iter().map(|t| format!("{}:{}", b.name, t.action)).collect::<Vec<_>>(),
        "requires": b.requires,
        "provider_features": b.provider_features,
        "isolation": b.isolation,
        "tools_listed_every_seconds": b.tools_listed_every_seconds,
        "warm_pool": b.warm_pool,
        "config": b.config,
        "contract": b.contract,
        "instances": b.instances,
        "limits": { "pool_min": limits.pool_min, "pool_max": limits.pool_max,
                     "memory_bytes": limits.memory_bytes, "call_timeout_ms": limits.call_timeout_ms },
    })
}

/// The `/v1/backends` entry of a loaded backend: its description plus `last_error` (the
/// last refused component, cleared by a successful load) and `pending` (an upgrade
/// waiting for approval: what it declares beyond the running version in `added`, what its
/// grants allow beyond the running config's in `grants_added`) and `oci` (where an
/// `oci://` backend was pulled from: reference, resolved digest, signature checked, served
/// from the cache).
pub fn backend_entry(wharf: &Wharf, backend: &BackendSummary) -> Value {
    let mut entry = backend_json(backend);
    let (error, pending) = wharf.backend_status(&backend.name);
    entry["last_error"] = json!(error);
    entry["pending"] = json!(pending);
    entry["oci"] = json!(wharf.backend_source(&backend.name));
    entry
}

/// Refused components of names that are not loaded, as `/v1/backends` lists them.
pub fn rejected(wharf: &Wharf, caller: &Caller) -> Vec<Value> {
    wharf
        .rejected_backends()
        .into_iter()
        .filter(|(name, _)| caller.may_use(name, None))
        .map(|(name, r)| json!({ "name": name, "reason": r.reason, "sha256": r.sha256, "at_ms": r.at_ms }))
        .collect()
}

/// `GET /v1/backends`.
pub(super) async fn list_backends(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    answer(&caller, TokenScope::Read, async {
        Ok(backend_list(&wharf, &caller))
    })
    .await
}

/// The backends `caller` may use, and the rejected components it may see.
fn backend_list(wharf: &Wharf, caller: &Caller) -> Value {
    // The operator's config (redacted all the same) is for admins only, and so is what a
    // pending upgrade's grants add to it.
    let admin = caller.has(TokenScope::Admin);
    let list: Vec<Value> = wharf
        .backends()
        .iter()
        .filter(|b| caller.may_use(&b.name, None))
        .map(|b| {
            let mut entry = backend_entry(wharf, b);
            if let (false, Some(fields)) = (admin, entry.as_object_mut()) {
                fields.remove("config");
                if let Some(pending) = fields.get_mut("pending").and_then(Value::as_object_mut) {
                    pending.remove("grants_added");
                }
            }
            entry
        })
        .collect();
    let rejected = rejected(wharf, caller);
    json!({ "backends": list, "rejected": rejected })
}

//! The session routes of the compatibility API: a worker's sessions, one per backend.
//!
//! - `POST /api/v1/session/create {worker_id, resource_type, session_config?, ttl?}`
//!   acquires the session of (tenant, resource_type, worker_id): the same worker gets the
//!   same session back (`status` is `created` or `exists`).
//! - `POST /api/v1/session/destroy {worker_id, resource_type?, target_session_id?}` destroys
//!   that worker's session of that backend (4007 when it has none, as the replaced server
//!   answered), or every session of the worker when `resource_type` is absent.
//! - `POST|GET /api/v1/session/list {worker_id?, resource_type?}` lists the worker's
//!   sessions, or every session of the tenant without a worker id.
//! - `POST /api/v1/session/refresh {worker_id, resource_type?}` and
//!   `POST /api/v1/lifecycle/heartbeat {worker_id}` extend the idle TTL of the worker's
//!   sessions (of one backend, or all); `POST /api/v1/worker/disconnect {worker_id}`
//!   destroys every session of the worker.
//!
//! Sessions are created under the caller's own tenant and looked up under
//! [`Caller::session_tenant`](crate::api::auth::Caller::session_tenant) (an admin token sees every tenant's).

use super::{CompatCall, parse_body, session_json, worker_sessions};
use crate::api::envelope::Envelope;
use crate::api::route_answer::answer;
use crate::bounded::TtlSeconds;
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{SessionRequest, Wharf};
use crate::session_record::SessionRecord;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// `session/create`'s body. Its fields are optional to serde so that a missing one is
/// answered 4003 (not a parse error); the schema says which are required. The worker id
/// may come in the `X-Worker-ID` header instead.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(example = json!({"worker_id": "worker-1", "resource_type": "scratchpad"}))]
pub(crate) struct CreateBody {
    /// The worker: the session's key.
    #[schemars(with = "String", required, length(min = 1))]
    worker_id: Option<String>,
    /// The backend.
    #[schemars(with = "String", required, length(min = 1))]
    resource_type: Option<String>,
    /// Per-session config for the backend's `initialize`.
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    session_config: Option<Value>,
    /// Idle TTL in seconds (0 = none); the backend's when absent.
    #[serde(default)]
    ttl: Option<TtlSeconds>,
}

/// The body of `session/destroy` and `session/refresh` (the worker id may come in the
/// `X-Worker-ID` header instead).
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct WorkerBody {
    /// The worker.
    #[schemars(with = "String", required, length(min = 1))]
    worker_id: Option<String>,
    /// One backend's session of the worker; every backend's when absent.
    #[serde(default)]
    resource_type: Option<String>,
    /// Only this session (destroy).
    #[serde(default)]
    target_session_id: Option<String>,
}

/// The body of `lifecycle/heartbeat` and `worker/disconnect` (or the `X-Worker-ID` header).
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct WorkerOnly {
    /// The worker.
    #[schemars(with = "String", required, length(min = 1))]
    worker_id: Option<String>,
}

/// `session/list`'s body (or query): every session of the caller's tenant, or one worker's,
/// or one backend's.
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct ListBody {
    /// Only this worker's sessions (else the `X-Worker-ID` header, else every worker's).
    #[serde(default)]
    worker_id: Option<String>,
    /// Only this backend's sessions.
    #[serde(default)]
    resource_type: Option<String>,
}

/// A body that names a worker.
trait NamesWorker {
    fn worker_id(&self) -> Option<&str>;
}

impl NamesWorker for WorkerBody {
    fn worker_id(&self) -> Option<&str> {
        self.worker_id.as_deref()
    }
}

impl NamesWorker for CreateBody {
    fn worker_id(&self) -> Option<&str> {
        self.worker_id.as_deref()
    }
}

impl NamesWorker for WorkerOnly {
    fn worker_id(&self) -> Option<&str> {
        self.worker_id.as_deref()
    }
}

fn missing(field: &str) -> WharfError {
    WharfError::new(Code::MissingField, format!("`{field}` is required"))
}

fn no_session(worker: &str, backend: Option<&str>) -> WharfError {
    WharfError::session_not_found(match backend {
        Some(b) => format!("worker `{worker}` has no session of `{b}`"),
        None => format!("worker `{worker}` has no session"),
    })
}

/// `POST /api/v1/session/create`.
pub(super) async fn create(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    let envelope = answer(&call.caller, TokenScope::Call, async {
        let (body, worker) = call.worker_call::<CreateBody>(body)?;
        let backend = body
            .resource_type
            .filter(|r| !r.is_empty())
            .ok_or_else(|| missing("resource_type"))?;
        call.caller.require_tool(&backend, None)?;
        let config = match body.session_config {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) if m.is_empty() => None,
            Some(v @ Value::Object(_)) => Some(v),
            Some(_) => {
                return Err(WharfError::new(
                    Code::InvalidType,
                    "`session_config` must be a JSON object",
                ));
            }
        };
        let request = SessionRequest {
            backend,
            key: Some(worker.clone()),
            config,
            ttl_seconds: body.ttl,
            owner: None,
            holder: None,
            from_snapshot: None,
        };
        let (record, created) = call
            .wharf
            .create_session(&call.caller.tenant, request)
            .await?;
        let mut v = session_json(&record);
        v["session_status"] = v["status"].clone();
        v["status"] = json!(if created { "created" } else { "exists" });
        v["created"] = json!(created);
        Ok(v)
    })
    .await;
    with_session_meta(envelope)
}

impl CompatCall {
    /// The start of a route acting for a worker (after its `call` scope): the body, and
    /// the worker it names (body or header).
    fn worker_call<B: NamesWorker + serde::de::DeserializeOwned>(
        &self,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<(B, String), WharfError> {
        let body: B = parse_body(body)?;
        let worker = self.require_worker(body.worker_id())?;
        Ok((body, worker))
    }
}

/// Deletes each session, going on past a failure; the first failure is the answer.
async fn delete_sessions<'a>(
    wharf: &Wharf,
    tenant: &crate::tenant::Tenant,
    sessions: &'a [SessionRecord],
) -> Result<Vec<&'a SessionRecord>, WharfError> {
    let mut deleted = Vec::new();
    let mut first_error = None;
    for s in sessions {
        match wharf.delete_session(tenant, &s.id).await {
            Ok(_) => deleted.push(s),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(deleted), Err)
}

/// Copies the session id and backend of a session reply into its `meta`.
fn with_session_meta(mut e: Envelope) -> Envelope {
    e.meta.session_id = e.data_text("session_id");
    e.meta.backend = e.data_text("resource_type");
    e
}

/// `POST /api/v1/session/destroy`.
pub(super) async fn destroy(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    let envelope = answer(&call.caller, TokenScope::Call, async {
        let (body, worker) = call.worker_call::<WorkerBody>(body)?;
        let backend = body.resource_type.as_deref().filter(|b| !b.is_empty());
        if let Some(b) = backend {
            call.caller.require_tool(b, None)?;
        }
        let tenant = call.caller.session_tenant();
        let targets: Vec<_> = worker_sessions(&call.wharf, tenant, backend, &worker)
            .await?
            .into_iter()
            .filter(|s| body.target_session_id.as_ref().is_none_or(|t| *t == s.id))
            .collect();
        if targets.is_empty() && (backend.is_some() || body.target_session_id.is_some()) {
            return Err(no_session(&worker, backend));
        }
        let destroyed: Vec<Value> = delete_sessions(&call.wharf, tenant, &targets)
            .await?
            .into_iter()
            .map(|s| json!({"session_id": s.id, "resource_type": s.backend}))
            .collect();
        let first = targets.first();
        Ok(json!({
            "message": format!("destroyed {} session(s) of worker {worker}", destroyed.len()),
            "worker_id": worker,
            "resource_type": backend,
            "session_id": first.map(|s| s.id.clone()),
            "session_name": first.map(|s| format!("{}_{}", s.backend, s.key)),
            "destroyed": destroyed,
            "count": destroyed.len(),
        }))
    })
    .await;
    with_session_meta(envelope)
}

/// `POST|GET /api/v1/session/list`.
pub(super) async fn list(
    call: CompatCall,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Envelope {
    answer(&call.caller, TokenScope::Read, async {
        let body: ListBody = parse_body(body)?;
        let query = query.map(|q| q.0).unwrap_or_default();
        let from_query = |k: &str| query.get(k).cloned();
        let worker = call.worker_id(
            body.worker_id
                .or_else(|| from_query("worker_id"))
                .as_deref(),
        );
        let backend = body
            .resource_type
            .or_else(|| from_query("resource_type"))
            .filter(|b| !b.is_empty());
        let sessions: Vec<Value> = call
            .wharf
            .sessions(
                call.caller.session_tenant(),
                backend.as_deref(),
                worker.as_deref(),
            )
            .await?
            .iter()
            .filter(|s| call.caller.may_use(&s.backend, None))
            .map(session_json)
            .collect();
        Ok(json!({ "worker_id": worker, "count": sessions.len(), "sessions": sessions }))
    })
    .await
}

/// Refreshes the worker's ready sessions (of one backend, or all); sessions that went away
/// meanwhile are skipped.
async fn refresh_worker(
    call: &CompatCall,
    worker: &str,
    backend: Option<&str>,
) -> Result<Vec<Value>, WharfError> {
    let tenant = call.caller.session_tenant();
    let mut refreshed = Vec::new();
    for s in worker_sessions(&call.wharf, tenant, backend, worker).await? {
        match call.wharf.refresh_session(tenant, &s.id).await {
            Ok(fresh) => refreshed.push(session_json(&fresh)),
            // Gone meanwhile, or paused (its TTL does not run while paused).
            Err(e) if e.code == Code::SessionNotFound || e.code == Code::Conflict => {}
            Err(e) => return Err(e),
        }
    }
    Ok(refreshed)
}

/// `POST /api/v1/session/refresh`.
pub(super) async fn refresh(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    answer(&call.caller, TokenScope::Call, async {
        let (body, worker) = call.worker_call::<WorkerBody>(body)?;
        let backend = body.resource_type.as_deref().filter(|b| !b.is_empty());
        let refreshed = refresh_worker(&call, &worker, backend).await?;
        if refreshed.is_empty() && backend.is_some() {
            return Err(no_session(&worker, backend));
        }
        let details: Map<String, Value> = refreshed
            .iter()
            .map(|s| {
                let rt = s["resource_type"].as_str().unwrap_or_default().to_string();
                (
                    rt,
                    json!({"status": "refreshed", "expires_at": s["expires_at"]}),
                )
            })
            .collect();
        let first = refreshed.first();
        Ok(json!({
            "message": format!("refreshed {} session(s)", refreshed.len()),
            "worker_id": worker,
            "resource_type": backend,
            "session_id": first.map(|s| s["session_id"].clone()),
            "expires_at": first.map(|s| s["expires_at"].clone()),
            "refreshed_count": refreshed.len(),
            "details": details,
            "sessions": refreshed,
        }))
    })
    .await
}

/// `POST /api/v1/lifecycle/heartbeat`: extends the idle TTL of every session of the worker.
pub(super) async fn heartbeat(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    answer(&call.caller, TokenScope::Call, async {
        let (_, worker) = call.worker_call::<WorkerOnly>(body)?;
        let refreshed = refresh_worker(&call, &worker, None).await?;
        let active: Vec<Value> = refreshed
            .iter()
            .map(|s| s["resource_type"].clone())
            .collect();
        Ok(json!({
            "worker_id": worker,
            "active_sessions": active,
            "refreshed_count": refreshed.len(),
            "sessions": refreshed,
        }))
    })
    .await
}

/// `POST /api/v1/worker/disconnect`: destroys every session of the worker.
pub(super) async fn disconnect(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    answer(&call.caller, TokenScope::Call, async {
            let (_, worker) = call.worker_call::<WorkerOnly>(body)?;
            let tenant = call.caller.session_tenant();
            let sessions = worker_sessions(&call.wharf, tenant, None, &worker).await?;
            let cleaned: Vec<&str> = delete_sessions(&call.wharf, tenant, &sessions)
                .await?
                .into_iter()
                .map(|s| s.id.as_str())
                .collect();
            Ok(json!({ "worker_id": worker, "sessions_cleaned": cleaned.len(), "session_ids": cleaned }))
    })
    .await
}

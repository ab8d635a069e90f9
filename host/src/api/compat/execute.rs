//! `POST /api/v1/execute` of the compatibility API: one action for a worker.
//!
//! An action is a tool name (`vm:click`, `vm.click`, a bare `click` … resolved by the front
//! door) run with `params` as its arguments; `timeout` is in seconds (a float is fine) and
//! becomes the call's `timeout_ms`. When the tool runs in a session (it declares
//! `SessionNeed::Required`, or its backend is a sandbox provider) the worker's session of
//! that backend is used; a worker with none gets a **temporary** session, created for the
//! call and destroyed right after it (also when the call fails, and, from a background
//! task, when the request is dropped mid-call). A tool with an optional session uses the
//! worker's session when it has one. The reply's `data` is the tool's result itself (with
//! `attachments` added when the tool returned any), as the replaced server answered.
//!
//! `/api/v1/execute/batch` (in `batch`) runs several actions the same way.

use super::{parse_body, worker_id, worker_sessions};
use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::envelope::RequestClock;
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{CallOutcome, CallPlace, CallRequest, SessionRequest, Wharf};
use crate::tool::{SessionNeed, ToolResult};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// `execute`'s body.
#[derive(Deserialize)]
struct ExecuteBody {
    #[serde(default)]
    worker_id: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    trace_id: Option<String>,
}

/// One action.
#[derive(Deserialize)]
pub(super) struct ActionSpec {
    pub(super) action: String,
    #[serde(default)]
    pub(super) params: Option<Value>,
    #[serde(default)]
    pub(super) timeout: Option<f64>,
}

/// What every action of one request shares.
pub(super) struct Ctx<'a> {
    pub(super) wharf: &'a Arc<Wharf>,
    pub(super) caller: &'a Caller,
    pub(super) worker: Option<&'a str>,
    pub(super) trace_id: &'a str,
}

/// A session made for one call; destroyed by [`TempSession::destroy`], or in the
/// background if it is dropped first.
struct TempSession {
    wharf: Arc<Wharf>,
    tenant: crate::tenant::Tenant,
    id: String,
    armed: bool,
}

impl TempSession {
    async fn create(ctx: &Ctx<'_>, backend: &str, worker: &str) -> Result<Self, WharfError> {
        let request = SessionRequest {
            backend: backend.to_string(),
            // A key of its own, so concurrent temporary sessions of one worker never share.
            key: Some(format!("{worker}#temp-{}", uuid::Uuid::new_v4().simple())),
            config: None,
            ttl_seconds: None,
            owner: None,
            holder: None,
        };
        let (record, _) = ctx
            .wharf
            .create_session(&ctx.caller.tenant, request)
            .await?;
        tracing::debug!(session = %record.id, worker, backend, "temporary session for one call");
        Ok(Self {
            wharf: ctx.wharf.clone(),
            tenant: ctx.caller.own_tenant(),
            id: record.id,
            armed: true,
        })
    }

    async fn destroy(mut self) {
        self.armed = false;
        if let Err(e) = self.wharf.delete_session(&self.tenant, &self.id).await {
            tracing::warn!(session = %self.id, "destroying a temporary session failed: {}", e.message);
        }
    }
}

impl Drop for TempSession {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (wharf, tenant, id) = (self.wharf.clone(), self.tenant.clone(), self.id.clone());
        handle.spawn(async move {
            if let Err(e) = wharf.delete_session(&tenant, &id).await {
                tracing::warn!(session = %id, "destroying a temporary session failed: {}", e.message);
            }
        });
    }
}

/// `timeout` seconds → ms; absent, zero, negative or not a number means the backend's limit.
fn timeout_ms(seconds: Option<f64>) -> Option<u64> {
    seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| (s * 1000.0).ceil() as u64)
}

/// Runs one action for the context's worker.
pub(super) async fn run_action(
    ctx: &Ctx<'_>,
    spec: ActionSpec,
) -> Result<CallOutcome, (WharfError, CallPlace)> {
    let mut place = CallPlace::default();
    let (backend, action) = ctx
        .wharf
        .resolve_tool(&spec.action)
        .map_err(|e| (e, place.clone()))?;
    let canonical = format!("{}:{action}", backend.name);
    place.tool = Some(canonical.clone());
    place.backend = Some(backend.name.to_string());
    let fail = |e: WharfError, place: &CallPlace| (e, place.clone());
    ctx.caller
        .require_tool(&backend.name, Some(&action))
        .map_err(|e| fail(e, &place))?;
    let params = match spec.params {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            let e = WharfError::new(Code::InvalidType, "`params` must be a JSON object");
            return Err(fail(e, &place));
        }
    };
    let Some(need) = backend.tool(&action).map(|t| t.session) else {
        let e = WharfError::invalid_request(format!("unknown tool `{}`", spec.action));
        return Err(fail(e, &place));
    };
    let needs_session = need == SessionNeed::Required;
    let mut temporary = None;
    let session_id = match (ctx.worker, need) {
        (_, SessionNeed::None) if !needs_session => None,
        (None, _) if needs_session => {
            let e = WharfError::new(
                Code::MissingField,
                format!(
                    "`{canonical}` runs in a session: worker_id is required (in the JSON body or the X-Worker-ID header)"
                ),
            );
            return Err(fail(e, &place));
        }
        (None, _) => None,
        (Some(worker), _) => {
            let tenant = ctx.caller.session_tenant();
            let mine = worker_sessions(ctx.wharf, tenant, Some(&backend.name), worker)
                .await
                .map_err(|e| fail(e, &place))?;
            let existing = mine
                .iter()
                .find(|s| s.tenant == ctx.caller.tenant)
                .or(mine.first());
            match existing {
                Some(s) => Some(s.id.clone()),
                None if needs_session => {
                    // Refuse bad arguments before paying for a session.
                    backend
                        .validate_args(&action, &params)
                        .map_err(|e| fail(e, &place))?;
                    let temp = TempSession::create(ctx, &backend.name, worker)
                        .await
                        .map_err(|e| fail(e, &place))?;
                    let id = temp.id.clone();
                    temporary = Some(temp);
                    Some(id)
                }
                None => None,
            }
        }
    };
    let request = CallRequest {
        tool: canonical,
        args: params,
        session_id,
        timeout_ms: timeout_ms(spec.timeout),
    };
    let result = ctx
        .wharf
        .call(
            ctx.caller.session_tenant(),
            request,
            Some(ctx.trace_id.to_string()),
        )
        .await;
    if let Some(temp) = temporary {
        temp.destroy().await;
    }
    result
}

/// A tool's result as the reply's `data`.
pub(super) fn result_data(result: &ToolResult) -> Value {
    if result.attachments.is_empty() {
        return result.content.clone();
    }
    let attachments = crate::api::envelope::attachments_json(&result.attachments);
    match result.content.clone() {
        Value::Object(mut m) if !m.contains_key("attachments") => {
            m.insert("attachments".into(), Value::Array(attachments));
            Value::Object(m)
        }
        other => json!({ "result": other, "attachments": attachments }),
    }
}

/// `POST /api/v1/execute`.
pub(super) async fn execute(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Envelope {
    let body: ExecuteBody = match caller
        .require(TokenScope::Call)
        .and_then(|()| parse_body(body))
    {
        Ok(b) => b,
        Err(e) => return RequestClock::start().reply(Err(e)),
    };
    let clock = RequestClock::with_trace(body.trace_id.as_deref());
    let Some(action) = body.action.filter(|a| !a.is_empty()) else {
        return clock.reply(Err(WharfError::new(
            Code::MissingField,
            "`action` is required",
        )));
    };
    let worker = worker_id(body.worker_id.as_deref(), &headers);
    let ctx = Ctx {
        wharf: &wharf,
        caller: &caller,
        worker: worker.as_deref(),
        trace_id: &clock.trace_id,
    };
    let spec = ActionSpec {
        action,
        params: body.params,
        timeout: body.timeout,
    };
    let outcome = run_action(&ctx, spec).await;
    let meta = clock.meta();
    match outcome {
        Ok(o) => {
            let (result, place) = o.into_parts();
            Envelope::ok(result_data(&result), meta).at(place)
        }
        Err((err, place)) => Envelope::error(err, meta).at(place),
    }
}

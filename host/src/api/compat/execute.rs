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

use super::CompatCall;
use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{
    CallPlace, Invocation, InvocationResult, SessionChoice, Wharf, WhenMissing,
};
use crate::tool::ToolResult;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// `execute`'s body. `action` is optional to serde so that its absence is answered 4003
/// (not a parse error); the schema says it is required.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(example = json!({"worker_id": "worker-1", "action": "echo:say", "params": {"text": "hi"}}))]
pub(crate) struct ExecuteBody {
    /// The worker whose session a session tool runs in (else the `X-Worker-ID` header; a
    /// tool that needs a session and gets no worker is refused with 4003).
    #[serde(default)]
    worker_id: Option<String>,
    /// The tool: `backend:action`, `backend.action`, an alias or a short name.
    #[schemars(with = "String", required, length(min = 1))]
    action: Option<String>,
    /// The tool's arguments.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    params: Option<Value>,
    /// Wall-clock limit in seconds (a float is fine); absent, zero or negative: the
    /// backend's limit.
    #[serde(default)]
    timeout: Option<f64>,
    /// Sent back as `meta.trace_id`.
    #[serde(default)]
    trace_id: Option<String>,
}

/// One action.
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct ActionSpec {
    /// The tool, as `execute`'s `action`.
    pub(super) action: String,
    /// The tool's arguments.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub(super) params: Option<Value>,
    /// Wall-clock limit in seconds, as `execute`'s `timeout`.
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

impl CompatCall {
    /// What the actions of this request share, for `worker` under `trace_id`.
    pub(super) fn ctx<'a>(&'a self, worker: Option<&'a str>, trace_id: &'a str) -> Ctx<'a> {
        Ctx {
            wharf: &self.wharf,
            caller: &self.caller,
            worker,
            trace_id,
        }
    }
}

/// `timeout` in seconds; absent, zero, negative or not a number means the backend's limit.
fn timeout(seconds: Option<f64>) -> Option<Duration> {
    seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_millis((s * 1000.0).ceil() as u64))
}

/// Runs one action for the context's worker: its session of the tool's backend, or a
/// temporary one when the tool needs a session and the worker has none.
pub(super) async fn run_action(ctx: &Ctx<'_>, spec: ActionSpec) -> InvocationResult {
    let params = match spec.params {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            let e = WharfError::new(Code::InvalidType, "`params` must be a JSON object");
            let place = ctx
                .wharf
                .find_tool(&spec.action)
                .map(|found| CallPlace {
                    tool: Some(format!("{}:{}", found.backend, found.action)),
                    backend: Some(found.backend),
                    ..CallPlace::default()
                })
                .unwrap_or_default();
            return Err((e, place));
        }
    };
    let invocation = Invocation {
        session: ctx
            .worker
            .map_or(SessionChoice::None, |worker| SessionChoice::Key {
                key: worker.to_string(),
                missing: WhenMissing::Temporary,
            }),
        deadline: timeout(spec.timeout),
        trace_id: Some(ctx.trace_id.to_string()),
        ..Invocation::new(ctx.caller.principal(), spec.action, params, missing_worker)
    };
    ctx.wharf.invoke(invocation).await
}

/// The refusal of a tool that runs in a session when the request names no worker.
fn missing_worker(tool: &str) -> WharfError {
    WharfError::new(
        Code::MissingField,
        format!(
            "`{tool}` runs in a session: worker_id is required (in the JSON body or the X-Worker-ID header)"
        ),
    )
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
pub(super) async fn execute(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    let (body, span, clock) =
        match call.open::<ExecuteBody>(body, "compat.execute", |b| b.trace_id.as_deref()) {
            Ok(opened) => opened,
            Err(refused) => return refused,
        };
    let Some(action) = body.action.filter(|a| !a.is_empty()) else {
        return clock.reply(Err(WharfError::new(
            Code::MissingField,
            "`action` is required",
        )));
    };
    let worker = call.worker_id(body.worker_id.as_deref());
    let ctx = call.ctx(worker.as_deref(), &clock.trace_id);
    let spec = ActionSpec {
        action,
        params: body.params,
        timeout: body.timeout,
    };
    let outcome = run_action(&ctx, spec).instrument(span).await;
    let meta = clock.meta();
    match outcome {
        Ok(o) => {
            let (result, place) = o.into_parts();
            Envelope::ok(result_data(&result), meta).at(place)
        }
        Err((err, place)) => Envelope::error(err, meta).at(place),
    }
}

//! The compatibility API of the sandbox server Wharf replaces, so its
//! existing Python client works unchanged: `GET /health` and `GET /ready` at the root, and
//! under `/api/v1/` session create/destroy/list/refresh, execute, execute/batch, tools,
//! tools/{name}/schema, lifecycle/heartbeat and worker/disconnect.
//!
//! Every reply is the Wharf envelope `{code, message, data, meta}` with the one code table.
//! A worker is the replaced server's unit of isolation: the session of a worker for a
//! backend (its `resource_type`) is the Wharf session of (tenant, backend, key = worker id).
//! The worker id comes from the body's `worker_id` or, when the body has none, the
//! `X-Worker-ID` header; where one is needed and neither has it the reply is 4003.
//! Bodies are parsed leniently (unknown fields such as `custom_name` or `trace_id` the
//! client sends are ignored), as the replaced server did.

mod batch;
mod execute;
mod sessions;
mod tools;

/// The request bodies, whose schemas `/openapi.json` shows.
pub(crate) use batch::BatchBody;
pub(crate) use execute::ExecuteBody;
pub(crate) use sessions::{CreateBody, ListBody, WorkerBody, WorkerOnly};

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, RequestClock};
pub(super) use crate::api::json_body::from_json;
use crate::api::json_body::{self, EmptyBody};
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::Wharf;
use crate::session_record::SessionRecord;
use crate::session_record::SessionState;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;

/// The header the replaced server's client sends its worker id in.
pub const WORKER_HEADER: &str = "x-worker-id";

/// The compatibility routes, to be merged into the REST router (which supplies the state,
/// the body limit and the fallback).
pub fn router() -> Router<Arc<Wharf>> {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/api/v1/session/create", post(sessions::create))
        .route("/api/v1/session/destroy", post(sessions::destroy))
        .route(
            "/api/v1/session/list",
            post(sessions::list).get(sessions::list),
        )
        .route("/api/v1/session/refresh", post(sessions::refresh))
        .route("/api/v1/lifecycle/heartbeat", post(sessions::heartbeat))
        .route("/api/v1/worker/disconnect", post(sessions::disconnect))
        .route("/api/v1/execute", post(execute::execute))
        .route("/api/v1/execute/batch", post(batch::batch))
        .route("/api/v1/tools", get(tools::list))
        .route("/api/v1/tools/{name}/schema", get(tools::schema))
}

/// A JSON body parsed leniently: an empty body is `{}` (the client sends bodiless POSTs).
fn parse_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, WharfError> {
    json_body::parse_body(body, EmptyBody::EmptyObject)
}

/// What a compat route that acts for a worker starts from, besides its body: the front
/// door, the caller (refused as [`Caller`] refuses) and the headers (where the worker id
/// may be).
struct CompatCall {
    wharf: Arc<Wharf>,
    caller: Caller,
    headers: HeaderMap,
}

impl FromRequestParts<Arc<Wharf>> for CompatCall {
    type Rejection = Envelope;

    async fn from_request_parts(parts: &mut Parts, wharf: &Arc<Wharf>) -> Result<Self, Envelope> {
        let caller = Caller::from_request_parts(parts, wharf).await?;
        Ok(Self {
            wharf: Arc::clone(wharf),
            caller,
            headers: parts.headers.clone(),
        })
    }
}

impl CompatCall {
    /// The opening every compat call shares: the caller may call, the body parses, its
    /// `trace_id` is a valid one (or absent); the request's span and clock start under
    /// `protocol`. On a refusal, the envelope to answer with.
    #[allow(clippy::result_large_err)]
    fn open<T: DeserializeOwned>(
        &self,
        body: Result<Bytes, BytesRejection>,
        protocol: &'static str,
        trace_id_of: impl FnOnce(&T) -> Option<&str>,
    ) -> Result<(T, tracing::Span, RequestClock), Envelope> {
        let body: T = self
            .caller
            .require(TokenScope::Call)
            .and_then(|()| parse_body(body))
            .map_err(|e| RequestClock::start().reply(Err(e)))?;
        let trace_id = crate::api::envelope::client_trace_id(trace_id_of(&body))
            .map_err(|e| RequestClock::start().reply(Err(e)))?;
        let (span, clock) = RequestClock::for_request(protocol, &self.caller.name, trace_id);
        Ok((body, span, clock))
    }

    /// The worker id: the body's when it has a non-empty one, else the `X-Worker-ID`
    /// header's.
    fn worker_id(&self, body: Option<&str>) -> Option<String> {
        body.filter(|w| !w.is_empty())
            .map(str::to_string)
            .or_else(|| {
                self.headers
                    .get(WORKER_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
            })
    }

    /// The worker id, or 4003.
    fn require_worker(&self, body: Option<&str>) -> Result<String, WharfError> {
        self.worker_id(body).ok_or_else(|| {
            WharfError::new(
                Code::MissingField,
                "worker_id is required (in the JSON body or the X-Worker-ID header)",
            )
        })
    }
}

/// The ready, paused and archived sessions of a worker (all its backends, or one).
async fn worker_sessions(
    wharf: &Wharf,
    tenant: &crate::tenant::Tenant,
    backend: Option<&str>,
    worker: &str,
) -> Result<Vec<SessionRecord>, WharfError> {
    Ok(wharf
        .sessions(tenant, backend, Some(worker))
        .await?
        .into_iter()
        .filter(|s| {
            matches!(
                s.state,
                SessionState::Ready | SessionState::Paused | SessionState::Archived
            )
        })
        .collect())
}

/// A session as the replaced server showed it (times in ms since the Unix epoch), with
/// Wharf's own fields alongside.
fn session_json(s: &SessionRecord) -> Value {
    let status = match s.state {
        SessionState::Ready => "active",
        SessionState::Paused => "paused",
        SessionState::Archived => "archived",
        SessionState::Creating => "creating",
        SessionState::Releasing => "releasing",
    };
    json!({
        "session_id": s.id,
        "session_name": format!("{}_{}", s.backend, s.key),
        "worker_id": s.key,
        "resource_type": s.backend,
        "status": status,
        "state": s.state,
        "auto_created": false,
        "data": s.data,
        "created_at": s.created_at_ms,
        "last_activity": s.last_activity_ms,
        "expires_at": s.expires_at_ms(),
        "idle_ttl_seconds": s.idle_ttl_seconds,
    })
}

/// A success envelope with some of its data repeated at the top level, where the replaced
/// server's client reads it (`tools` of the tool list, the fields of a tool schema).
fn mirrored(envelope: Envelope, keys: &[&str]) -> Response {
    if envelope.code != Code::Success {
        return envelope.into_response();
    }
    let extra: Vec<(String, Value)> = keys
        .iter()
        .filter_map(|k| envelope.data.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let Ok(Value::Object(mut body)) = serde_json::to_value(&envelope) else {
        return envelope.into_response();
    };
    for (k, v) in extra {
        body.entry(k).or_insert(v);
    }
    axum::Json(Value::Object(body)).into_response()
}

/// `GET /health`: the process answers (open, no token).
async fn health() -> Envelope {
    RequestClock::start().reply(Ok(json!({ "status": "healthy" })))
}

/// `GET /ready`: at least one backend is loaded, else 5011 (open, no token).
async fn ready(State(wharf): State<Arc<Wharf>>) -> Envelope {
    let clock = RequestClock::start();
    clock.reply(
        crate::api::route_answer::readiness(&wharf).map(|mut ready| {
            ready["tools_count"] = json!(wharf.tools().len());
            ready
        }),
    )
}

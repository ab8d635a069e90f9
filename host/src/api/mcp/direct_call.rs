//! A plain `tools/call` answered without rmcp's session worker. rmcp runs every request of
//! an MCP session through that session's worker task: an untagged parse that tries each
//! request type in turn, channels to the worker and back, and an SSE stream that
//! [`super::json_reply`] then turns into JSON. For a trivial tool that is about twice the
//! work of the whole REST call (ARCHITECTURE.md, "The path of one call").
//!
//! A POST is answered here, as one JSON body, when it is a single `tools/call` request of
//! a live MCP session that needs nothing only rmcp does: no progress token (progress goes
//! out on the session's stream), no `_meta` protocol version, no input responses or request
//! state, a protocol version before the one with standard headers (rmcp checks those
//! against the body), a client that accepts both JSON and an event stream, and a body of
//! declared length within the server's limit. A 2026-07-28 `tools/call` (no MCP session,
//! which rmcp would serve with a handler made for that one request) is answered here too
//! when its standard headers, `Mcp-Name` included, and its `_meta` are what the revision
//! requires and it asks nothing only rmcp does ([`eligibility`]). Everything else, and
//! every other message, goes on to rmcp unchanged. The call itself is
//! [`super::call::run`], as through rmcp.
//!
//! Cancelling works as through rmcp: a `notifications/cancelled` naming the call's request
//! id in the same MCP session drops the call (its instance is discarded, its exec killed)
//! and the POST ends with an empty event stream, no response, as rmcp ends it (a
//! 2026-07-28 call is cancelled by closing its response, which drops it). The
//! notification still goes on to rmcp, which accepts it. Ending the MCP session (`DELETE`,
//! [`super::session_end`]) drops its direct calls, as rmcp drops the calls of a session it
//! ends.

mod eligibility;

use super::call::{self, MCP_SESSION_HEADER};
use crate::api::envelope::Envelope;
use crate::error_code::WharfError;
use crate::front_door::Wharf;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use eligibility::{modern_call, modern_headers, plain_call, plain_headers};
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelledNotificationParam, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The direct calls running now, by MCP session and request id, so that a
/// `notifications/cancelled` can reach them.
pub struct DirectCalls {
    wharf: Arc<Wharf>,
    sessions: Arc<LocalSessionManager>,
    running: Mutex<HashMap<(Arc<str>, RequestId), CancellationToken>>,
}

impl DirectCalls {
    /// Direct calls over `wharf` for the sessions of `sessions` (the transport's manager).
    pub fn new(wharf: Arc<Wharf>, sessions: Arc<LocalSessionManager>) -> Self {
        Self {
            wharf,
            sessions,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a call; `None` when one with that id already runs in that session (the
    /// client's mistake, which rmcp then answers).
    fn start(self: &Arc<Self>, key: (Arc<str>, RequestId)) -> Option<Running> {
        let mut running = self.running.lock().ok()?;
        let std::collections::hash_map::Entry::Vacant(slot) = running.entry(key.clone()) else {
            return None;
        };
        let cancel = self.wharf.shutdown_token().child_token();
        slot.insert(cancel.clone());
        Some(Running {
            calls: self.clone(),
            key,
            cancel,
        })
    }

    fn cancel(&self, key: &(Arc<str>, RequestId)) {
        if let Some(cancel) = self.running.lock().ok().and_then(|r| r.get(key).cloned()) {
            cancel.cancel();
        }
    }

    /// Cancels every direct call of the MCP session `id`, as rmcp cancels the calls of a
    /// session it ends.
    fn cancel_session(&self, id: &str) {
        if let Ok(running) = self.running.lock() {
            running
                .iter()
                .filter(|((session, _), _)| &**session == id)
                .for_each(|(_, cancel)| cancel.cancel());
        }
    }
}

/// A registered call; unregistered when dropped (ended, or its HTTP request went away).
struct Running {
    calls: Arc<DirectCalls>,
    key: (Arc<str>, RequestId),
    cancel: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut running) = self.calls.running.lock() {
            running.remove(&self.key);
        }
    }
}

/// A JSON-RPC message whose params are read as `P`. A `tools/call` is read in one pass as
/// `Message<CallToolRequestParams>`; any other message fails that (or names another method)
/// and is looked at again only if it may be a cancel.
#[derive(Deserialize)]
struct Message<'a, P> {
    jsonrpc: Option<&'a str>,
    id: Option<RequestId>,
    method: Option<&'a str>,
    params: Option<P>,
}

/// The middleware: see the module doc.
pub async fn answer(
    State(calls): State<Arc<DirectCalls>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::DELETE {
        let wharf = calls.wharf.clone();
        return super::session_end::end(&wharf, |id| calls.cancel_session(id), request, next).await;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let limit = calls.wharf.server().max_body_bytes;
    let Some(session) = request
        .headers()
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(Arc::<str>::from)
    else {
        return answer_stateless(&calls, request, next, limit).await;
    };
    let (posted, next) = match read_post(request, next, limit, plain_headers).await {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    if let Some((id, params)) = posted.call
        && plain_call(&params)
        && live(&calls, &session).await
        && let Some(running) = calls.start((session.clone(), id.clone()))
    {
        let cancel = running.cancel.clone();
        return run(&calls, Some(running), &cancel, &posted.parts, id, params).await;
    }
    if let Ok(Message {
        jsonrpc: Some("2.0"),
        id: None,
        method: Some("notifications/cancelled"),
        params:
            Some(CancelledNotificationParam {
                request_id: Some(id),
                ..
            }),
    }) = serde_json::from_slice::<Message<CancelledNotificationParam>>(&posted.bytes)
    {
        calls.cancel(&(session, id));
    }
    pass_on(posted.parts, posted.bytes, next).await
}

/// A request without an MCP session: a plain 2026-07-28 `tools/call` is answered here (its
/// cancellation is the client closing the response, which drops this future); anything
/// else goes on to rmcp.
async fn answer_stateless(
    calls: &Arc<DirectCalls>,
    request: Request,
    next: Next,
    limit: usize,
) -> Response {
    let (posted, next) = match read_post(request, next, limit, modern_headers).await {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    if let Some((id, params)) = posted.call
        && modern_call(&params, &posted.parts.headers)
    {
        let cancel = calls.wharf.shutdown_token().child_token();
        return run(calls, None, &cancel, &posted.parts, id, params).await;
    }
    pass_on(posted.parts, posted.bytes, next).await
}

/// A POST read whole: its head, its body, and the `tools/call` request the body is, if it
/// is one.
struct Posted {
    parts: http::request::Parts,
    bytes: axum::body::Bytes,
    call: Option<(RequestId, CallToolRequestParams)>,
}

/// The request read whole (at most `limit` bytes) when `wanted` passes its headers; else
/// the answer already: rmcp's, for headers this middleware leaves to it, or the refusal of
/// a body that could not be read.
async fn read_post(
    request: Request,
    next: Next,
    limit: usize,
    wanted: fn(&http::HeaderMap, usize) -> bool,
) -> Result<(Posted, Next), Response> {
    if !wanted(request.headers(), limit) {
        return Err(next.run(request).await);
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        let e = WharfError::invalid_request(format!("the request body could not be read: {e}"));
        Envelope::refusal(e)
    })?;
    let call = match serde_json::from_slice::<Message<CallToolRequestParams>>(&bytes) {
        Ok(Message {
            jsonrpc: Some("2.0"),
            id: Some(id),
            method: Some("tools/call"),
            params: Some(params),
        }) => Some((id, params)),
        _ => None,
    };
    Ok((Posted { parts, bytes, call }, next))
}

/// The request, body and all, on to rmcp.
async fn pass_on(parts: http::request::Parts, bytes: axum::body::Bytes, next: Next) -> Response {
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Whether the transport still has the MCP session `id`.
async fn live(calls: &DirectCalls, id: &Arc<str>) -> bool {
    calls.sessions.has_session(id).await.unwrap_or(false)
}

/// Runs the call and answers it as one JSON-RPC message.
/// `running` is the registration of a call in an MCP session (a legacy peer), `None` for a
/// 2026-07-28 request.
async fn run(
    calls: &Arc<DirectCalls>,
    running: Option<Running>,
    cancel: &CancellationToken,
    parts: &http::request::Parts,
    id: RequestId,
    mut params: CallToolRequestParams,
) -> Response {
    let meta = params.meta.take().unwrap_or_default();
    let caller = call::caller_of(Some(parts));
    let key = call::session_key(Some(parts), &meta);
    let Some(outcome) = call::run(&calls.wharf, caller, key, params, cancel, None).await else {
        return event_stream_without_messages();
    };
    let legacy = running.is_some();
    drop(running);
    let message = match outcome {
        Ok(result) => {
            let mut result = ServerResult::from(CallToolResponse::from(result));
            // A peer in an MCP session speaks a revision before 2026-07-28
            // (`plain_headers`): the answer has the legacy shape, as rmcp's handler gives it.
            if legacy {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    match serde_json::to_vec(&message) {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            let e = WharfError::internal(format!("the MCP answer did not serialize: {e}"));
            Envelope::refusal(e)
        }
    }
}

/// What rmcp sends for a cancelled request: an event stream that ends with no message.
fn event_stream_without_messages() -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        )],
        Body::empty(),
    )
        .into_response()
}

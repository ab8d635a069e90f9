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
//! declared length within the server's limit. Everything else, and every other message,
//! goes on to rmcp unchanged. The call itself is [`super::call::run`], as through rmcp.
//!
//! Cancelling works as through rmcp: a `notifications/cancelled` naming the call's request
//! id in the same MCP session drops the call (its instance is discarded, its exec killed)
//! and the POST ends with an empty event stream, no response, as rmcp ends it. The
//! notification still goes on to rmcp, which accepts it. Ending the MCP session (`DELETE`,
//! [`super::session_end`]) drops its direct calls, as rmcp drops the calls of a session it
//! ends.

use super::call::{self, MCP_SESSION_HEADER};
use super::json_reply::accepts;
use crate::api::envelope::Envelope;
use crate::error_code::WharfError;
use crate::front_door::Wharf;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelledNotificationParam, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// The `_meta` keys that only rmcp's own handling honours.
const RMCP_META: [&str; 2] = ["progressToken", "io.modelcontextprotocol/protocolVersion"];

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
    let Some(session) = request
        .headers()
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(Arc::<str>::from)
    else {
        return next.run(request).await;
    };
    let limit = calls.wharf.server().max_body_bytes;
    if !plain_headers(request.headers(), limit) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let e = WharfError::invalid_request(format!("the request body could not be read: {e}"));
            return Envelope::refusal(e);
        }
    };
    if let Ok(Message {
        jsonrpc: Some("2.0"),
        id: Some(id),
        method: Some("tools/call"),
        params: Some(params),
    }) = serde_json::from_slice::<Message<CallToolRequestParams>>(&bytes)
        && plain_call(&params)
        && live(&calls, &session).await
        && let Some(running) = calls.start((session.clone(), id.clone()))
    {
        return run(&calls, running, &parts, id, params).await;
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
    }) = serde_json::from_slice::<Message<CancelledNotificationParam>>(&bytes)
    {
        calls.cancel(&(session, id));
    }
    pass_on(parts, bytes, next).await
}

/// The request, body and all, on to rmcp.
async fn pass_on(parts: http::request::Parts, bytes: axum::body::Bytes, next: Next) -> Response {
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The headers of a request this module may answer (module doc).
fn plain_headers(headers: &HeaderMap, limit: usize) -> bool {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let version_ok = match headers.get(PROTOCOL_HEADER).map(HeaderValue::to_str) {
        None => true,
        Some(Ok(v)) => {
            v < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|k| k.as_str() == v)
        }
        Some(Err(_)) => false,
    };
    declared.is_some_and(|n| n <= limit)
        && version_ok
        && accepts_json_and_events(headers)
        && crate::api::json_body::check_media_type(headers, true, &["application/json"], false)
            .is_ok()
}

/// Whether the client accepts both a JSON body and an event stream. The value the MCP
/// specification gives clients is matched as bytes; any other is parsed.
fn accepts_json_and_events(headers: &HeaderMap) -> bool {
    const USUAL: &[u8] = b"application/json, text/event-stream";
    let mut values = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (values.next(), values.next())
        && only.as_bytes() == USUAL
    {
        return true;
    }
    accepts(headers, "application/json") && accepts(headers, "text/event-stream")
}

/// Whether this module may answer a `tools/call` with these params.
fn plain_call(params: &CallToolRequestParams) -> bool {
    let rmcp_only = params.input_responses.is_some()
        || params.request_state.is_some()
        || params
            .meta
            .as_ref()
            .is_some_and(|m| RMCP_META.iter().any(|k| m.contains_key(*k)));
    !rmcp_only
}

/// Whether the transport still has the MCP session `id`.
async fn live(calls: &DirectCalls, id: &Arc<str>) -> bool {
    calls.sessions.has_session(id).await.unwrap_or(false)
}

/// Runs the call and answers it as one JSON-RPC message.
async fn run(
    calls: &Arc<DirectCalls>,
    running: Running,
    parts: &http::request::Parts,
    id: RequestId,
    mut params: CallToolRequestParams,
) -> Response {
    let meta = params.meta.take().unwrap_or_default();
    let caller = call::caller_of(&calls.wharf, Some(parts));
    let key = call::session_key(Some(parts), &meta);
    let Some(outcome) = call::run(&calls.wharf, caller, key, params, &running.cancel, None).await
    else {
        return event_stream_without_messages();
    };
    drop(running);
    let message = match outcome {
        Ok(result) => {
            let mut result = ServerResult::from(CallToolResponse::from(result));
            // Only legacy peers come this way (an MCP session, a version before
            // 2026-07-28: `plain_headers`), so the answer has the legacy shape, as rmcp's
            // handler gives it.
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const PLAIN: [(&str, &str); 4] = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("content-length", "100"),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    #[test]
    fn only_plain_requests_are_answered_directly() {
        assert!(plain_headers(&headers(&PLAIN), 1000));
        assert!(!plain_headers(&headers(&PLAIN), 99), "over the limit");
        let without = |name: &str| {
            let mut h = headers(&PLAIN);
            h.remove(name);
            h
        };
        assert!(!plain_headers(&without("content-length"), 1000), "chunked");
        assert!(!plain_headers(&without("accept"), 1000));
        assert!(plain_headers(&without("mcp-protocol-version"), 1000));
        let with = |name: &'static str, value: &'static str| {
            let mut h = headers(&PLAIN);
            h.insert(name, HeaderValue::from_static(value));
            h
        };
        assert!(!plain_headers(
            &with("mcp-protocol-version", "2026-07-28"),
            1000
        ));
        assert!(!plain_headers(
            &with("mcp-protocol-version", "1999-01-01"),
            1000
        ));
        assert!(!plain_headers(&with("accept", "application/json"), 1000));
        assert!(!plain_headers(
            &with("accept", "application/json, text/event-stream;q=0"),
            1000
        ));
        assert!(!plain_headers(&with("content-type", "text/plain"), 1000));
        // Other spellings of the usual value are parsed, not matched as bytes.
        assert!(plain_headers(
            &with("accept", "Text/Event-Stream;q=0.5,application/json"),
            1000
        ));
        let mut split = without("accept");
        split.append("accept", HeaderValue::from_static("application/json"));
        assert!(!plain_headers(&split, 1000), "one of the two");
        split.append("accept", HeaderValue::from_static("text/event-stream"));
        assert!(plain_headers(&split, 1000), "over two header lines");
    }

    /// Whether a `tools/call` with these params is answered here.
    fn call(params: &str) -> bool {
        let message =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
        serde_json::from_slice::<Message<CallToolRequestParams>>(message.as_bytes())
            .ok()
            .and_then(|m| m.params)
            .is_some_and(|p| plain_call(&p))
    }

    #[test]
    fn calls_that_need_rmcp_go_to_rmcp() {
        assert!(call(r#"{"name":"echo_say","arguments":{"text":"hi"}}"#));
        assert!(call(r#"{"name":"x","_meta":{"wharf/session_key":"k"}}"#));
        assert!(!call(r#"{"name":"x","_meta":{"progressToken":1}}"#));
        assert!(!call(r#"{"name":"x","requestState":"s"}"#));
        assert!(!call(r#"{"name":"x","arguments":[1]}"#));
        assert!(!call(r#"{"arguments":{}}"#));
        assert!(!call(r#"[]"#));
    }
}

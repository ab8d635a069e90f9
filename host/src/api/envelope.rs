//! `{code, message, data, meta}`: every reply, success or failure, with one HTTP status
//! per code.

use crate::error_code::{Code, WharfError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

/// Where a reply came from.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Meta {
    /// Canonical tool name, for calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Backend, for calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Session, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// True when the call resumed its paused session, or restored its archived one, first
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    /// Time spent in the host, in ms.
    pub duration_ms: u64,
    /// Request trace id.
    pub trace_id: String,
}

/// One reply.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Envelope {
    /// Code from the table (0 = success).
    pub code: Code,
    /// A sentence for people.
    pub message: String,
    /// The payload (null on failure unless the error carries details).
    pub data: Value,
    /// Whether retrying can help (failures only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Where it came from.
    pub meta: Meta,
}

impl Envelope {
    /// A success.
    pub fn ok(data: Value, meta: Meta) -> Self {
        Self {
            code: Code::Success,
            message: "ok".into(),
            data,
            retryable: None,
            meta,
        }
    }
    /// A failure.
    pub fn error(err: WharfError, meta: Meta) -> Self {
        Self {
            code: err.code,
            message: err.message,
            data: err.data.unwrap_or(Value::Null),
            retryable: Some(err.retryable),
            meta,
        }
    }
    /// The answer to a request refused before any call ran: the error's envelope with an
    /// empty `meta`, as a response.
    pub fn refusal(err: WharfError) -> Response {
        Self::error(err, Meta::default()).into_response()
    }
    /// The text at `key` of the reply's `data`, if any (for a `meta` that repeats it).
    pub fn data_text(&self, key: &str) -> Option<String> {
        self.data
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
    /// Says in `meta` where the reply's call ran, or got to before it failed.
    pub fn at(mut self, place: crate::front_door::CallPlace) -> Self {
        self.meta.tool = place.tool;
        self.meta.backend = place.backend;
        self.meta.session_id = place.session_id;
        self.meta.resumed = place.resumed.then_some(true);
        self
    }
}

/// Whole seconds until a retry can help: `data.retry_after_ms` rounded up (a quota says
/// when it frees), else 1.
pub fn retry_after_seconds(data: &Value) -> u64 {
    data.get("retry_after_ms")
        .and_then(Value::as_u64)
        .map_or(1, |ms| ms.div_ceil(1000).max(1))
}

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = matches!(self.code, Code::RateLimited | Code::BackendUnavailable)
            .then(|| retry_after_seconds(&self.data));
        // Into a `Vec` sized for a typical envelope rather than `axum::Json`'s writer over
        // `BytesMut`, whose many small writes were a visible share of a call (callgrind).
        let mut body = Vec::with_capacity(256);
        if let Err(e) = serde_json::to_writer(&mut body, &self) {
            return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
        }
        let json = axum::http::HeaderValue::from_static("application/json");
        let mut response = (
            status,
            [(axum::http::header::CONTENT_TYPE, json)],
            axum::body::Bytes::from(body),
        )
            .into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}

/// The longest trace id a client may send.
pub const MAX_CLIENT_TRACE_ID: usize = 128;

/// A client's `trace_id`, which is copied into every audit line and span of its request:
/// refused (4004) unless it is 1 to [`MAX_CLIENT_TRACE_ID`] characters of letters, digits
/// and `-_.:/`; absent or empty is none.
pub fn client_trace_id(sent: Option<&str>) -> Result<Option<&str>, WharfError> {
    let Some(t) = sent.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let plain = t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'));
    if t.len() > MAX_CLIENT_TRACE_ID || !plain {
        return Err(WharfError::new(
            crate::error_code::Code::InvalidType,
            format!(
                "`trace_id` must be 1 to {MAX_CLIENT_TRACE_ID} letters, digits or `-_.:/` (got {} bytes)",
                t.len()
            ),
        ));
    }
    Ok(Some(t))
}

/// Per-request timing and trace id (the client's `trace_id` when it sent one).
pub struct RequestClock {
    started: std::time::Instant,
    /// The trace id sent back in `meta`.
    pub trace_id: String,
}

impl RequestClock {
    /// Starts timing with a new trace id (a route that runs no tool; a tool call's clock
    /// comes with its span from [`RequestClock::for_request`]).
    pub fn start() -> Self {
        Self::traced(uuid::Uuid::new_v4().simple().to_string())
    }

    fn traced(trace_id: String) -> Self {
        Self {
            started: std::time::Instant::now(),
            trace_id,
        }
    }

    /// The span of a request on `protocol` and its clock: the answer carries the client's
    /// trace id when it sent one (recorded on the span too), else the span's own.
    pub fn for_request(
        protocol: &'static str,
        token: &str,
        client_trace_id: Option<&str>,
    ) -> (tracing::Span, Self) {
        let (span, trace_id) = crate::telemetry::request_span(protocol, token);
        let trace_id = match client_trace_id.filter(|t| !t.is_empty()) {
            Some(client) => {
                crate::telemetry::record_client_trace_id(&span, client);
                client.to_string()
            }
            None => trace_id,
        };
        (span, Self::traced(trace_id))
    }

    /// `meta` so far.
    pub fn meta(&self) -> Meta {
        Meta {
            duration_ms: self.started.elapsed().as_millis() as u64,
            trace_id: self.trace_id.clone(),
            ..Meta::default()
        }
    }

    /// The envelope of a result.
    pub fn reply(&self, result: Result<Value, WharfError>) -> Envelope {
        match result {
            Ok(data) => Envelope::ok(data, self.meta()),
            Err(e) => Envelope::error(e, self.meta()),
        }
    }
}

/// Attachments as JSON: name, MIME type, size and the bytes in base64.
pub fn attachments_json(attachments: &[crate::tool::Attachment]) -> Vec<Value> {
    use base64::Engine as _;
    attachments
        .iter()
        .map(|a| {
            serde_json::json!({
                "name": a.name,
                "mime_type": a.mime_type,
                "size": a.data.len(),
                "data_base64": base64::engine::general_purpose::STANDARD.encode(&a.data),
            })
        })
        .collect()
}

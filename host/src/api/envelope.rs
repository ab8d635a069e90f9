//! `{code, message, data, meta}`: every reply, success or failure, with one HTTP status
//! per code.

use crate::error_code::{Code, WharfError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

/// Where a reply came from.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// Time spent in the host, in ms.
    pub duration_ms: u64,
    /// Request trace id.
    pub trace_id: String,
}

/// One reply.
#[derive(Debug, Clone, Serialize)]
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
}

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = matches!(self.code, Code::RateLimited | Code::BackendUnavailable);
        let mut response = (status, axum::Json(self)).into_response();
        if retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

//! `rmcp`'s own refusals in Wharf's words. The streamable-HTTP transport answers a request
//! it cannot take (no MCP session id, an unknown one, a body that is not JSON-RPC, one of
//! another type or too large) in plain text without a `Content-Type`. A refusal whose status
//! has a code in the table becomes that code's envelope (a JSON body that is no JSON-RPC
//! message, which the transport answers 415, is 4002); the two that have none (405 for a
//! method the transport does not serve, 406 for a client that does not accept both JSON
//! and an event stream, as MCP requires) stay plain text, now saying so.

use crate::api::envelope::{Envelope, Meta};
use crate::error_code::{Code, WharfError};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

/// Longest refusal text kept in the envelope's message.
const MAX_TEXT: usize = 1024;

/// The code of a transport refusal's status, if the table has one.
fn code_of(status: StatusCode) -> Option<Code> {
    match status {
        StatusCode::BAD_REQUEST => Some(Code::InvalidRequest),
        StatusCode::NOT_FOUND => Some(Code::SessionNotFound),
        StatusCode::PAYLOAD_TOO_LARGE => Some(Code::PayloadTooLarge),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Some(Code::UnsupportedMediaType),
        StatusCode::INTERNAL_SERVER_ERROR => Some(Code::Internal),
        _ => None,
    }
}

/// The middleware: see the module doc.
pub async fn as_envelopes(request: Request, next: Next) -> Response {
    // The transport answers a JSON body that is no JSON-RPC message 415 too; with the
    // right `Content-Type` that is a malformed request (4002), not the wrong media type.
    let typed_json = crate::api::json_body::check_media_type(
        request.headers(),
        true,
        &["application/json"],
        false,
    )
    .is_ok();
    let response = next.run(request).await;
    let status = response.status();
    if status.is_success() || response.headers().contains_key(header::CONTENT_TYPE) {
        return response;
    }
    let code = match code_of(status) {
        Some(Code::UnsupportedMediaType) if typed_json => Some(Code::InvalidRequest),
        code => code,
    };
    let Some(code) = code else {
        let mut response = response;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return response;
    };
    let bytes = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Default::default(),
    };
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_TEXT)]).into_owned();
    let message = if text.trim().is_empty() {
        format!("the MCP transport refused the request ({status})")
    } else {
        text
    };
    Envelope::error(WharfError::new(code, message), Meta::default()).into_response()
}

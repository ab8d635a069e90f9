//! JSON request bodies mapped onto the code table: not `application/json` 4150 (HTTP 415),
//! over the limit 4013, unreadable, malformed or not an object 4002, a missing field 4003,
//! a wrong type 4004. Shared by the REST, the compatibility and the MCP routes.

use crate::api::envelope::Envelope;
use crate::error_code::{Code, WharfError};
use axum::body::{Bytes, HttpBody};
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Request};
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tower_http::validate_request::{ValidateRequest, ValidateRequestHeaderLayer};

/// What an empty body means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyBody {
    /// 4002: a body is required.
    Refused,
    /// `{}` (the replaced server's client sends bodiless POSTs).
    EmptyObject,
}

/// The content type of JSON bodies.
const JSON: &str = "application/json";
/// The content type of raw uploads (a missing `Content-Type` is taken as this).
const OCTETS: &str = "application/octet-stream";

/// 4150 unless a body (if the request carries one) is one of `accepted` (parameters such as
/// `charset` aside); `untyped` says whether a body without `Content-Type` passes. Browsers
/// send `text/plain` and form bodies cross-origin without asking first: they never pass.
pub fn check_media_type(
    headers: &HeaderMap,
    has_body: bool,
    accepted: &[&str],
    untyped: bool,
) -> Result<(), WharfError> {
    if !has_body {
        return Ok(());
    }
    let essence = match headers.get(axum::http::header::CONTENT_TYPE) {
        None if untyped => return Ok(()),
        None => "",
        Some(value) => value
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim(),
    };
    if accepted.iter().any(|a| a.eq_ignore_ascii_case(essence)) {
        return Ok(());
    }
    let essence = essence.to_ascii_lowercase();
    Err(WharfError::new(
        Code::UnsupportedMediaType,
        format!(
            "the request body must be {} (Content-Type was `{}`)",
            accepted.join(" or "),
            essence.escape_debug()
        ),
    ))
}

/// The media-type guard of a group of routes: a request with a body must carry one of
/// `accepted` (or none, when `untyped`), else 4150. A synchronous check
/// (`tower_http`'s `ValidateRequest`), like the edge guard (`api/edge`).
#[derive(Debug, Clone, Copy)]
pub struct MediaTypeGuard {
    accepted: &'static [&'static str],
    untyped: bool,
}

impl<B: HttpBody> ValidateRequest<B> for MediaTypeGuard {
    type ResponseBody = axum::body::Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response> {
        let has_body = request.body().size_hint().exact() != Some(0);
        check_media_type(request.headers(), has_body, self.accepted, self.untyped)
            .map_err(Envelope::refusal)
    }
}

/// For routes that take JSON: a body must be `application/json` (4150).
pub fn require_json() -> ValidateRequestHeaderLayer<MediaTypeGuard> {
    ValidateRequestHeaderLayer::custom(MediaTypeGuard {
        accepted: &[JSON],
        untyped: false,
    })
}

/// For raw uploads (files, components): a body must be `application/octet-stream`,
/// `application/wasm` or untyped (4150).
pub fn require_octets() -> ValidateRequestHeaderLayer<MediaTypeGuard> {
    ValidateRequestHeaderLayer::custom(MediaTypeGuard {
        accepted: &[OCTETS, "application/wasm"],
        untyped: true,
    })
}

/// For file uploads: a file's bytes (`application/octet-stream` or untyped) or a
/// directory's tar stream (`application/x-tar`) (4150).
pub fn require_file_body() -> ValidateRequestHeaderLayer<MediaTypeGuard> {
    ValidateRequestHeaderLayer::custom(MediaTypeGuard {
        accepted: &[OCTETS, "application/x-tar"],
        untyped: true,
    })
}

/// Reads and parses a body into JSON.
pub fn read_json(
    body: Result<Bytes, BytesRejection>,
    empty: EmptyBody,
) -> Result<Value, WharfError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            WharfError::new(
                Code::PayloadTooLarge,
                "the request body is over the size limit",
            )
        } else {
            WharfError::invalid_request(format!("could not read the request body: {rejection}"))
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return match empty {
            EmptyBody::Refused => Err(WharfError::invalid_request(
                "the request body is empty; send a JSON object",
            )),
            EmptyBody::EmptyObject => Ok(Value::Object(Map::new())),
        };
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        WharfError::invalid_request(format!("the request body is not valid JSON: {e}"))
    })
}

/// Deserializes a JSON object into `T`; `what` names it in messages.
pub fn from_json<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, WharfError> {
    if !value.is_object() {
        return Err(WharfError::invalid_request(format!(
            "{what} must be a JSON object"
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        let reason = e.to_string();
        let text = format!("{what}: {reason}");
        if reason.starts_with("missing field") {
            WharfError::new(Code::MissingField, text)
        } else if reason.starts_with("invalid type") || reason.starts_with("invalid value") {
            WharfError::new(Code::InvalidType, text)
        } else {
            WharfError::invalid_request(text)
        }
    })
}

/// A query string parsed into `T`: a missing parameter 4003, any other refusal 4002 (axum's
/// own rejection would answer in plain text, outside the envelope).
pub fn parse_query<T>(
    query: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, WharfError> {
    query.map(|q| q.0).map_err(|rejection| {
        let text = rejection.body_text();
        if text.contains("missing field") {
            WharfError::new(Code::MissingField, text)
        } else {
            WharfError::invalid_request(text)
        }
    })
}

/// A body parsed into `T`.
pub fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    empty: EmptyBody,
) -> Result<T, WharfError> {
    // One pass for a well-formed object; anything else takes the two steps below, which
    // give the refusal its code (an array would otherwise fill a struct's fields in order).
    if let Ok(bytes) = &body
        && bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && let Ok(parsed) = serde_json::from_slice(bytes)
    {
        return Ok(parsed);
    }
    from_json(read_json(body, empty)?, "the request body")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Req {
        tool: String,
    }

    #[test]
    fn a_body_parses_in_one_pass_or_two_with_the_same_answers() {
        let parse = |body: &'static [u8]| {
            parse_body::<Req>(Ok(Bytes::from_static(body)), EmptyBody::Refused)
        };
        assert_eq!(parse(b" {\"tool\":\"a\"} ").unwrap().tool, "a");
        // A struct would take an array's items in order; a body must be an object.
        let array = parse(b"[\"a\"]").unwrap_err();
        assert_eq!(array.code, Code::InvalidRequest, "{}", array.message);
        assert!(
            array.message.contains("must be a JSON object"),
            "{}",
            array.message
        );
        // A repeated key keeps its last value, as the two-step path always did.
        assert_eq!(parse(b"{\"tool\":\"a\",\"tool\":\"b\"}").unwrap().tool, "b");
        assert_eq!(parse(b"{}").unwrap_err().code, Code::MissingField);
        assert_eq!(parse(b"{\"tool\":1}").unwrap_err().code, Code::InvalidType);
        assert_eq!(parse(b"{\"tool\":").unwrap_err().code, Code::InvalidRequest);
        assert_eq!(parse(b"  ").unwrap_err().code, Code::InvalidRequest);
    }

    #[test]
    fn bodies_of_other_types_are_refused() {
        let typed = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert("content-type", t.parse().unwrap());
            h
        };
        let none = HeaderMap::new();
        let json = check_media_type(
            &typed("application/json; charset=utf-8"),
            true,
            &[JSON],
            false,
        );
        assert!(json.is_ok());
        // Media types compare without case (RFC 9110, section 8.3.1).
        assert!(check_media_type(&typed("Application/JSON"), true, &[JSON], false).is_ok());
        for t in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            let e = check_media_type(&typed(t), true, &[JSON], false).unwrap_err();
            assert_eq!(e.code, Code::UnsupportedMediaType, "{t}");
            assert_eq!(e.code.http_status(), 415);
        }
        assert!(check_media_type(&none, true, &[JSON], false).is_err());
        assert!(check_media_type(&none, false, &[JSON], false).is_ok());
        assert!(check_media_type(&typed("text/plain"), false, &[JSON], false).is_ok());
        assert!(check_media_type(&none, true, &[OCTETS], true).is_ok());
        assert!(check_media_type(&typed("text/plain"), true, &[OCTETS], true).is_err());
    }

    #[test]
    fn failures_map_onto_the_code_table() {
        let ok = |s: &'static str| Ok(Bytes::from_static(s.as_bytes()));
        for (body, empty, code) in [
            ("", EmptyBody::Refused, Code::InvalidRequest),
            (" ", EmptyBody::EmptyObject, Code::MissingField),
            ("{x", EmptyBody::Refused, Code::InvalidRequest),
            ("[1]", EmptyBody::Refused, Code::InvalidRequest),
            (r#"{"tool":5}"#, EmptyBody::Refused, Code::InvalidType),
        ] {
            let e = parse_body::<Req>(ok(body), empty).unwrap_err();
            assert_eq!(e.code, code, "{body:?}");
        }
        assert_eq!(
            parse_body::<Req>(ok(r#"{"tool":"a"}"#), EmptyBody::Refused)
                .unwrap()
                .tool,
            "a"
        );
    }
}

//! JSON request bodies mapped onto the code table: over the limit 4013, unreadable,
//! malformed or not an object 4002, a missing field 4003, a wrong type 4004. Shared by the
//! REST and the compatibility routes.

use crate::error_code::{Code, WharfError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// What an empty body means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyBody {
    /// 4002: a body is required.
    Refused,
    /// `{}` (the replaced server's client sends bodiless POSTs).
    EmptyObject,
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

/// A body parsed into `T`.
pub fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    empty: EmptyBody,
) -> Result<T, WharfError> {
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
    fn failures_map_onto_the_code_table() {
        let ok = |s: &'static str| Ok(Bytes::from_static(s.as_bytes()));
        assert_eq!(
            parse_body::<Req>(ok(""), EmptyBody::Refused)
                .unwrap_err()
                .code,
            Code::InvalidRequest
        );
        assert_eq!(
            parse_body::<Req>(ok(" "), EmptyBody::EmptyObject)
                .unwrap_err()
                .code,
            Code::MissingField
        );
        assert_eq!(
            parse_body::<Req>(ok("{x"), EmptyBody::Refused)
                .unwrap_err()
                .code,
            Code::InvalidRequest
        );
        assert_eq!(
            parse_body::<Req>(ok("[1]"), EmptyBody::Refused)
                .unwrap_err()
                .code,
            Code::InvalidRequest
        );
        assert_eq!(
            parse_body::<Req>(ok(r#"{"tool":5}"#), EmptyBody::Refused)
                .unwrap_err()
                .code,
            Code::InvalidType
        );
        assert_eq!(
            parse_body::<Req>(ok(r#"{"tool":"a"}"#), EmptyBody::Refused)
                .unwrap()
                .tool,
            "a"
        );
    }
}

//! `POST /v1/call`'s body (REST's wire type, its serde and its schema in the OpenAPI
//! document), and REST's words for a tool that needs a session it was not given.

use crate::error_code::WharfError;
use serde::Deserialize;
use serde_json::Value;

/// A request to run a tool.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(example = serde_json::json!({"tool": "echo:say", "args": {"text": "hi", "times": 2}}))]
pub struct CallRequest {
    /// `backend:action` or an alias.
    pub tool: String,
    /// Arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The session to run in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Wall-clock limit; capped by the backend's own.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// 4007 for `tool` (canonical), which needs a session: how to make one over REST.
pub fn missing_session(tool: &str) -> WharfError {
    let backend = tool.split_once(':').map_or(tool, |(backend, _)| backend);
    WharfError::session_not_found(format!(
        "`{tool}` needs a session: create one with POST /v1/sessions {{\"backend\": \"{backend}\"}} and pass its id as session_id"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_backend_to_make_a_session_of() {
        let e = missing_session("scratchpad:read");
        assert_eq!(e.code, crate::error_code::Code::SessionNotFound);
        assert!(
            e.message
                .contains(r#"POST /v1/sessions {"backend": "scratchpad"}"#),
            "{}",
            e.message
        );
    }
}

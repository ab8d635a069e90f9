//! The toolset's `pause_sandbox` tool: an agent done for now freezes its own sandbox (as
//! E2B's `pause`), which keeps its processes and memory and uses no CPU. A call cannot
//! freeze the sandbox it runs in, so the front door pauses the session as soon as this
//! call's turn ends, as `POST /v1/sessions/{id}/pause` does; the agent's next call resumes
//! it and says so. Offered when the provider can pause.

use super::tools::{annotations, tool};
use crate::error_code::{Code, WharfError};
use crate::runtime::backend::SessionHostRef;
use crate::runtime::guest_types::SessionView;
use crate::tool::{ToolDescription, ToolResult};
use serde_json::{Value, json};

/// The tool's name.
pub const PAUSE_SANDBOX: &str = "pause_sandbox";

/// The tool's description.
pub fn tool_description() -> ToolDescription {
    tool(
        PAUSE_SANDBOX,
        "Pause this sandbox once this call returns: its processes (background ones included) and memory are kept, and it uses no CPU until the session's next call, which resumes it (its reply says `resumed`). Paused sessions count against their own caps; one past them keeps running.",
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
        annotations(false, false, true),
    )
}

/// Asks the host to pause `session` of `backend` after this call.
pub async fn call(
    backend: &str,
    session: &SessionView,
    args: Value,
    host: Option<&SessionHostRef>,
) -> Result<ToolResult, WharfError> {
    if !(args.is_null() || args.as_object().is_some_and(|o| o.is_empty())) {
        return Err(WharfError::new(
            Code::InvalidType,
            "invalid arguments: `pause_sandbox` takes none",
        ));
    }
    let host = super::tools::session_host(host, "pauses")?;
    host.pause_after_call(backend, session)?;
    Ok(ToolResult::json(json!({"pausing": true})))
}

//! The toolset's `preview_url` tool: a signed URL a person opens to a port the session
//! exposes (`expose_ports`), as Daytona's signed previews and E2B's `getHost`. The host's
//! previews mint it (docs/operators.md, "Previews"); offered beside the process tools,
//! since the sandbox agent that runs background processes is what relays the port.

use super::tools::{annotations, tool};
use crate::error_code::WharfError;
use crate::preview_signature::MAX_TTL_SECONDS;
use crate::runtime::backend::SessionHostRef;
use crate::runtime::guest_types::SessionView;
use crate::tool::{ToolDescription, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

/// The tool's name.
pub const PREVIEW_URL: &str = "preview_url";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    port: u16,
    ttl_seconds: Option<u64>,
}

/// The tool's description.
pub fn tool_description() -> ToolDescription {
    tool(
        PREVIEW_URL,
        "A signed URL a person can open in a browser to reach a port of this sandbox that the session exposes (session config `expose_ports`): a web server or dev server you started. Anyone holding the URL can open it until it expires; it never gives access to the API.",
        json!({"type": "object", "additionalProperties": false, "required": ["port"], "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "An exposed port the server listens on (inside the sandbox)."},
            "ttl_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_TTL_SECONDS, "description": "How long the URL works (default 3600)."}
        }}),
        annotations(true, false, false),
    )
}

/// Mints the URL for `session`.
pub async fn call(
    session: &SessionView,
    args: Value,
    host: Option<&SessionHostRef>,
) -> Result<ToolResult, WharfError> {
    let ask: Ask = super::tools::args(args)?;
    let host = super::tools::session_host(host, "previews")?;
    let link = host.signed_url(session, ask.port, ask.ttl_seconds).await?;
    Ok(ToolResult::json(json!({
        "url": link.url,
        "port": ask.port,
        "expires_at_s": link.expires_at_s,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_bounds_what_the_minter_checks_again() {
        let d = tool_description();
        assert_eq!(d.input_schema["properties"]["port"]["maximum"], 65535);
        assert_eq!(
            d.input_schema["properties"]["ttl_seconds"]["maximum"],
            MAX_TTL_SECONDS
        );
    }
}

//! The toolset's `snapshot_sandbox` tool: an agent checkpoints its own sandbox's filesystem
//! (as E2B's and Daytona's snapshots), to start new sessions from it later (`from_snapshot`)
//! or fork it. The host's front door makes it, as `POST /v1/sessions/{id}/snapshots` does
//! (docs/agents.md, "Snapshots and forks"); offered when the provider can snapshot.

use super::tools::{annotations, tool};
use crate::error_code::WharfError;
use crate::runtime::backend::SessionHostRef;
use crate::runtime::guest_types::SessionView;
use crate::snapshot_record::MAX_SNAPSHOT_NAME_BYTES;
use crate::tool::{ToolDescription, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

/// The tool's name.
pub const SNAPSHOT_SANDBOX: &str = "snapshot_sandbox";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    name: Option<String>,
}

/// The tool's description.
pub fn tool_description() -> ToolDescription {
    tool(
        SNAPSHOT_SANDBOX,
        "Snapshot this sandbox's filesystem (the work dir included; not its processes, memory, /tmp under gVisor or mounted volumes). The session keeps running. Returns the snapshot's id: a new session can start from it (`from_snapshot`), and the session can be forked from a fresh one. Snapshots count against the tenant's quota.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "name": {"type": "string", "maxLength": MAX_SNAPSHOT_NAME_BYTES, "description": "A name for it (default `snapshot of <session>`)."}
        }}),
        annotations(false, false, false),
    )
}

/// Snapshots `session`'s sandbox.
pub async fn call(
    session: &SessionView,
    args: Value,
    host: Option<&SessionHostRef>,
) -> Result<ToolResult, WharfError> {
    let ask: Ask = if args.is_null() {
        Ask { name: None }
    } else {
        super::tools::args(args)?
    };
    let host = super::tools::session_host(host, "snapshots")?;
    let snapshot = host.snapshot(session, ask.name).await?;
    Ok(ToolResult::json(json!({
        "snapshot": snapshot.id,
        "name": snapshot.name,
        "bytes": snapshot.bytes,
        "created_at_ms": snapshot.created_at_ms,
    })))
}

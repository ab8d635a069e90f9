//! The toolset's names, descriptions, schemas and annotations.

use crate::error_code::{Code, WharfError};
use crate::tool::{SessionNeed, ToolAnnotations, ToolDescription};
use serde_json::{Value, json};

/// A toolset tool that runs in a session.
pub(super) fn tool(
    action: &str,
    description: &str,
    schema: serde_json::Value,
    annotations: ToolAnnotations,
) -> ToolDescription {
    ToolDescription {
        action: action.to_string(),
        description: description.to_string(),
        input_schema: schema,
        output_schema: None,
        session: SessionNeed::Required,
        annotations,
    }
}

/// The hints of a toolset tool, which reaches nothing outside its sandbox.
pub(super) const fn annotations(
    read_only: bool,
    destructive: bool,
    idempotent: bool,
) -> ToolAnnotations {
    ToolAnnotations {
        read_only,
        destructive,
        idempotent,
        open_world: false,
    }
}

/// A tool's arguments as `T`; what does not fit them is `InvalidType`.
pub(super) fn args<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, WharfError> {
    serde_json::from_value(value)
        .map_err(|e| WharfError::new(Code::InvalidType, format!("invalid arguments: {e}")))
}

const READ_ONLY: ToolAnnotations = annotations(true, false, true);
const WRITES: ToolAnnotations = annotations(false, true, false);

/// The six tools every provider gets.
pub fn tool_descriptions() -> Vec<ToolDescription> {
    vec![
        tool(
            "run_command",
            "Run a shell command in the sandbox; returns exit code, stdout and stderr.",
            json!({"type": "object", "additionalProperties": false, "required": ["command"], "properties": {
                "command": {"type": "string", "minLength": 1, "description": "A shell command line."},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "Kill the command after this long (default 60)."},
                "stdin": {"type": "string", "description": "Text fed to the command's standard input."},
                "stream": {"type": "boolean", "default": true, "description": "Send the output to a caller that can take it while the command runs (REST with `Accept: application/x-ndjson`, MCP with a progress token); the result is the same."}
            }}),
            WRITES,
        ),
        tool(
            "read_file",
            "Read a text file; offset and limit count lines (1-based).",
            json!({"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
                "path": {"type": "string", "minLength": 1},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to return."}
            }}),
            READ_ONLY,
        ),
        tool(
            "write_file",
            "Write a whole file (parent directories are created).",
            json!({"type": "object", "additionalProperties": false, "required": ["path", "content"], "properties": {
                "path": {"type": "string", "minLength": 1},
                "content": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"}
            }}),
            WRITES,
        ),
        tool(
            "list_directory",
            "List a directory: name, kind and size of each entry.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "path": {"type": "string", "minLength": 1, "default": "."}
            }}),
            READ_ONLY,
        ),
        tool(
            "str_replace",
            "Replace the one occurrence of `old` with `new` in a file (fails if it occurs 0 or several times).",
            json!({"type": "object", "additionalProperties": false, "required": ["path", "old", "new"], "properties": {
                "path": {"type": "string", "minLength": 1},
                "old": {"type": "string", "minLength": 1},
                "new": {"type": "string"}
            }}),
            WRITES,
        ),
        tool(
            "export_file",
            "Return a whole file (any size, read in 4 MiB slices) as base64 with its sha256.",
            json!({"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
                "path": {"type": "string", "minLength": 1}
            }}),
            READ_ONLY,
        ),
    ]
}

/// The front door a call carries (`ToolCall::host`), for the tools it serves (previews,
/// snapshots, pauses: `what`); 4030 when the call carries none.
pub(super) fn session_host<'a>(
    host: Option<&'a crate::runtime::backend::SessionHostRef>,
    what: &str,
) -> Result<&'a dyn crate::runtime::backend::SessionHost, crate::error_code::WharfError> {
    host.map(|h| &*h.0).ok_or_else(|| {
        crate::error_code::WharfError::new(
            crate::error_code::Code::Forbidden,
            format!("this call carries no {what}: the host's front door makes them"),
        )
    })
}

//! What a tool is and what a call of it returns, in the host's own words. Shared by the
//! runtime (which reads them from a component), the sandbox toolset (which declares its
//! own), the front door and the API adapters; independent of any contract version.

use serde::Serialize;
use serde_json::Value;

/// Whether a tool runs inside a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionNeed {
    /// Stateless.
    None,
    /// Needs a session.
    Required,
    /// Uses one when given.
    Optional,
}

/// Hints for agents (mirrored into MCP tool annotations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ToolAnnotations {
    /// Changes nothing.
    pub read_only: bool,
    /// May destroy data.
    pub destructive: bool,
    /// Repeating it has no further effect.
    pub idempotent: bool,
    /// Reaches beyond the backend.
    pub open_world: bool,
}

/// One tool as the host knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDescription {
    /// The action name (without the backend prefix).
    pub action: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the result, if promised.
    pub output_schema: Option<Value>,
    /// Session need.
    pub session: SessionNeed,
    /// Hints.
    pub annotations: ToolAnnotations,
}

/// Binary output of a tool (a screenshot, a file).
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// File name.
    pub name: String,
    /// MIME type.
    pub mime_type: String,
    /// Bytes.
    pub data: Vec<u8>,
}

/// What a tool returned.
#[derive(Debug, Clone)]
pub struct ToolResult {
    /// The JSON result.
    pub content: Value,
    /// Binary outputs.
    pub attachments: Vec<Attachment>,
    /// New session data, when the tool changed it.
    pub session_data: Option<Value>,
}

impl ToolResult {
    /// A result with JSON content only.
    pub fn json(content: Value) -> Self {
        Self {
            content,
            attachments: Vec::new(),
            session_data: None,
        }
    }
}

//! The provisioner's REST wire format (request and reply bodies).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Body of `POST /api/sandboxes`.
#[derive(Serialize)]
pub struct CreateBody<'a> {
    /// Image to start from; `null` for the provisioner's default.
    pub image: Option<&'a str>,
    /// Environment variables of the sandbox.
    pub env: BTreeMap<&'a str, &'a str>,
    /// Working directory for commands; `null` for the image's default.
    pub workdir: Option<&'a str>,
    /// Longest life in seconds; `null` for the provisioner's default.
    pub lifetime_seconds: Option<u32>,
    /// Owner recorded on the sandbox.
    pub owner: Option<&'a str>,
}

/// Reply of `POST /api/sandboxes` (201).
#[derive(Deserialize)]
pub struct Created {
    /// The sandbox id, the handle this provider returns.
    pub id: String,
}

/// Body of `POST /api/sandboxes/{id}/v1/shell/exec`.
#[derive(Serialize)]
pub struct ExecBody<'a> {
    /// Shell command line.
    pub command: &'a str,
    /// Wall-clock limit in ms.
    pub timeout_ms: u32,
    /// Standard input, base64; absent for empty stdin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<String>,
    /// Per-stream output limit; the tail is kept.
    pub max_output_bytes: u32,
}

/// Reply of `POST /api/sandboxes/{id}/v1/shell/exec`.
#[derive(Deserialize)]
pub struct ExecReply {
    /// Exit code; `null` when the process was killed.
    pub exit_code: Option<i32>,
    /// Standard output (its tail when truncated), base64.
    #[serde(default)]
    pub stdout_base64: String,
    /// Standard error (its tail when truncated), base64.
    #[serde(default)]
    pub stderr_base64: String,
    /// Whether stdout was cut to its tail.
    #[serde(default)]
    pub stdout_truncated: bool,
    /// Whether stderr was cut to its tail.
    #[serde(default)]
    pub stderr_truncated: bool,
    /// Whether the command was killed for running past its timeout.
    #[serde(default)]
    pub timed_out: bool,
}

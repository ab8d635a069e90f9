//! The toolset's background-process tools, offered when the provider declares the
//! `processes` feature (contract 0.3.0): `start_process`, `process_output`, `send_input`,
//! `kill_process` and `list_processes`, each a call of the provider's `processes` export.

use super::file_ops::Sandbox;
use super::tools::{annotations, args, tool};
use crate::engines::container_types::{Command, OutputRead, ProcessInfo, ProcessStart, Signal};
use crate::error_code::{Code, WharfError};
use crate::tool::{ToolDescription, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// The most output one `process_output` returns.
const MAX_READ_BYTES: u32 = 256 * 1024;
/// What `process_output` returns when the caller names no size.
const DEFAULT_READ_BYTES: u32 = 64 * 1024;
/// The longest `process_output` waits for output.
const MAX_WAIT_MS: u32 = 30_000;

const SIGNALS: [(&str, Signal); 9] = [
    ("kill", Signal::Kill),
    ("term", Signal::Term),
    ("int", Signal::Int),
    ("hup", Signal::Hup),
    ("quit", Signal::Quit),
    ("usr1", Signal::Usr1),
    ("usr2", Signal::Usr2),
    ("stop", Signal::Stop),
    ("cont", Signal::Cont),
];

/// The five process tools.
pub fn tool_descriptions() -> Vec<ToolDescription> {
    let signals: Vec<&str> = SIGNALS.iter().map(|(name, _)| *name).collect();
    vec![
        tool(
            "start_process",
            "Start a background process (a dev server, a watcher, a long build, or with `terminal` an interactive program: a REPL, an editor); returns its pid. It keeps running between calls; read its output with process_output, type into it with send_input.",
            json!({"type": "object", "additionalProperties": false, "required": ["command"], "properties": {
                "command": {"type": "string", "minLength": 1, "description": "A shell command line."},
                "cwd": {"type": "string", "minLength": 1, "description": "Working directory (absolute)."},
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables."},
                "buffer_bytes": {"type": "integer", "minimum": 4096, "maximum": 16777216, "description": "Output kept, newest bytes (default 1 MiB)."},
                "user": {"type": "string", "minLength": 1, "maxLength": 64, "description": "User to run as (`name`, `uid` or `uid:gid`); the sandbox's by default. A sandbox made to run as a user runs nothing as another."},
                "terminal": {"type": "object", "additionalProperties": false, "required": ["cols", "rows"], "description": "Run it on a terminal (a PTY) of this size: output is one stream, as a person would see it.", "properties": {
                    "cols": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "rows": {"type": "integer", "minimum": 1, "maximum": 1000}
                }}
            }}),
            annotations(false, false, false),
        ),
        tool(
            "process_output",
            "Read a background process's output (stdout and stderr together) from a byte offset; with wait_ms, wait for new output. Pass next_offset back to continue.",
            json!({"type": "object", "additionalProperties": false, "required": ["pid"], "properties": {
                "pid": {"type": "integer", "minimum": 1, "maximum": 4294967295u32},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES, "default": DEFAULT_READ_BYTES},
                "wait_ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "default": 0}
            }}),
            annotations(true, false, true),
        ),
        tool(
            "send_input",
            "Write text to a background process's standard input; close ends it.",
            json!({"type": "object", "additionalProperties": false, "required": ["pid", "data"], "properties": {
                "pid": {"type": "integer", "minimum": 1, "maximum": 4294967295u32},
                "data": {"type": "string", "maxLength": 262144},
                "close": {"type": "boolean", "default": false}
            }}),
            annotations(false, false, false),
        ),
        tool(
            "kill_process",
            "Send a signal to a background process and its process group (default kill).",
            json!({"type": "object", "additionalProperties": false, "required": ["pid"], "properties": {
                "pid": {"type": "integer", "minimum": 1, "maximum": 4294967295u32},
                "signal": {"type": "string", "enum": signals, "default": "kill"}
            }}),
            annotations(false, true, true),
        ),
        tool(
            "list_processes",
            "List the sandbox's background processes: pid, command, running, exit code, output size.",
            json!({"type": "object", "additionalProperties": false, "properties": {}}),
            annotations(true, false, true),
        ),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartProcess {
    command: String,
    cwd: Option<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    buffer_bytes: u32,
    user: Option<String>,
    terminal: Option<crate::engines::container_types::TerminalSize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessOutput {
    pid: u32,
    #[serde(default)]
    offset: u64,
    max_bytes: Option<u32>,
    #[serde(default)]
    wait_ms: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendInput {
    pid: u32,
    data: String,
    #[serde(default)]
    close: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KillProcess {
    pid: u32,
    signal: Option<String>,
}

fn process_json(p: &ProcessInfo) -> Value {
    json!({
        "pid": p.pid,
        "command": p.command,
        "running": p.running,
        "exit_code": p.exit_code,
        "started_at_ms": p.started_at_ms,
        "output_bytes": p.output_bytes,
        "dropped_bytes": p.dropped_bytes,
    })
}

/// Runs one process tool; `None` when `action` is not one of them.
pub async fn call(
    sandbox: &Sandbox<'_>,
    action: &str,
    arguments: Value,
    timeout: Duration,
) -> Option<Result<ToolResult, WharfError>> {
    let known = matches!(
        action,
        "start_process" | "process_output" | "send_input" | "kill_process" | "list_processes"
    );
    if !known {
        return None;
    }
    if !sandbox.provider.features().processes {
        return Some(Err(WharfError::new(
            Code::Forbidden,
            format!(
                "`{action}` needs background processes (feature `processes`), which this provider does not offer"
            ),
        )));
    }
    Some(run(sandbox, action, arguments, timeout).await)
}

async fn run(
    sandbox: &Sandbox<'_>,
    action: &str,
    arguments: Value,
    timeout: Duration,
) -> Result<ToolResult, WharfError> {
    let provider = sandbox.provider;
    let site = sandbox.site();
    let handle = sandbox.handle;
    let result = match action {
        "start_process" => {
            let a: StartProcess = args(arguments)?;
            let start = ProcessStart {
                command: Command::Shell(a.command),
                env: a.env.into_iter().collect(),
                workdir: a.cwd,
                user: a.user,
                buffer_bytes: a.buffer_bytes,
                terminal: a.terminal,
            };
            process_json(&provider.start_process(site, handle, start).await?)
        }
        "process_output" => {
            let a: ProcessOutput = args(arguments)?;
            // Leave a second of the call's time for the answer to travel back.
            let left = u32::try_from(timeout.saturating_sub(Duration::from_secs(1)).as_millis())
                .unwrap_or(u32::MAX);
            let read = OutputRead {
                pid: a.pid,
                offset: a.offset,
                max_bytes: a
                    .max_bytes
                    .unwrap_or(DEFAULT_READ_BYTES)
                    .clamp(1, MAX_READ_BYTES),
                wait_ms: a.wait_ms.min(MAX_WAIT_MS).min(left),
            };
            let chunk = provider.process_output(site, handle, read).await?;
            let next = chunk.offset.saturating_add(chunk.data.len() as u64);
            json!({
                "pid": a.pid,
                "offset": chunk.offset,
                "next_offset": next,
                "dropped": chunk.dropped,
                "output": String::from_utf8_lossy(&chunk.data),
                "running": chunk.process.running,
                "exit_code": chunk.process.exit_code,
                "finished": !chunk.process.running && next >= chunk.process.output_bytes,
            })
        }
        "send_input" => {
            let a: SendInput = args(arguments)?;
            let bytes = a.data.len();
            provider
                .process_input(site, handle, a.pid, a.data.into_bytes(), a.close)
                .await?;
            json!({"pid": a.pid, "bytes_written": bytes, "closed": a.close})
        }
        "kill_process" => {
            let a: KillProcess = args(arguments)?;
            let name = a.signal.unwrap_or_else(|| "kill".to_string());
            let Some((_, signal)) = SIGNALS.iter().find(|(n, _)| *n == name) else {
                return Err(WharfError::new(
                    Code::InvalidInput,
                    format!("unknown signal `{name}`"),
                ));
            };
            provider
                .signal_process(site, handle, a.pid, *signal)
                .await?;
            json!({"pid": a.pid, "signal": name})
        }
        _ => {
            let list = provider.list_processes(site, handle).await?;
            json!({"processes": list.iter().map(process_json).collect::<Vec<_>>()})
        }
    };
    Ok(ToolResult::json(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_tool_has_a_schema_that_compiles() {
        for t in tool_descriptions() {
            assert!(
                jsonschema::validator_for(&t.input_schema).is_ok(),
                "{}",
                t.action
            );
        }
        let names: Vec<_> = tool_descriptions().into_iter().map(|t| t.action).collect();
        assert_eq!(
            names,
            [
                "start_process",
                "process_output",
                "send_input",
                "kill_process",
                "list_processes"
            ]
        );
    }

    #[test]
    fn hostile_arguments_are_refused() {
        assert!(args::<ProcessOutput>(json!({"pid": -1})).is_err());
        assert!(args::<ProcessOutput>(json!({"pid": 1u64 << 40})).is_err());
        assert!(args::<KillProcess>(json!({"pid": 1, "signal": 9})).is_err());
        assert!(args::<StartProcess>(json!({"command": "x", "extra": 1})).is_err());
    }
}

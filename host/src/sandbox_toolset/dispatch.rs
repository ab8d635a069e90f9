//! Runs one toolset call against a provider session.

use super::file_ops::Sandbox;
use super::shell;
use super::tools::args;
use crate::call_output::OutputSink;
use crate::clock::now_ms;
use crate::error_code::{Code, WharfError};
use crate::runtime::guest_types::SessionView;
use crate::runtime::provider_component::ProviderComponent;
use crate::tool::ToolResult;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Default command timeout when the caller gives none.
const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Output kept per stream for `run_command`.
const MAX_COMMAND_OUTPUT: u64 = 1 << 20;

#[derive(Deserialize)]
struct RunCommand {
    command: String,
    timeout_seconds: Option<u64>,
    stdin: Option<String>,
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct ReadFile {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
struct WriteFile {
    path: String,
    content: String,
    encoding: Option<String>,
}

#[derive(Deserialize)]
struct ListDirectory {
    path: Option<String>,
}

#[derive(Deserialize)]
struct StrReplace {
    path: String,
    old: String,
    new: String,
}

#[derive(Deserialize)]
struct PathOnly {
    path: String,
}

/// The sandbox handle stored in a provider session's data.
pub fn sandbox_handle(session: &SessionView) -> Result<&str, WharfError> {
    session.data["sandbox"].as_str().ok_or_else(|| {
        WharfError::session_not_found(format!("session `{}` has no sandbox", session.id))
    })
}

/// What is left of a session's lifetime, if it has an end.
fn remaining_lifetime(session: &SessionView) -> Option<Duration> {
    session
        .expires_at_ms
        .map(|end| Duration::from_millis(end.saturating_sub(now_ms())))
}

fn ok(content: Value) -> ToolResult {
    ToolResult::json(content)
}

/// Runs `action` of the toolset in `session`'s sandbox.
pub async fn call(
    provider: &ProviderComponent,
    tenant: &std::sync::Arc<str>,
    session: &SessionView,
    action: &str,
    arguments: Value,
    timeout: Duration,
    output: Option<&OutputSink>,
) -> Result<ToolResult, WharfError> {
    let handle = sandbox_handle(session)?;
    let sandbox = Sandbox {
        provider,
        tenant,
        session_id: &session.id,
        handle,
        timeout,
    };
    match action {
        "run_command" => {
            let a: RunCommand = args(arguments)?;
            let mut limit = a
                .timeout_seconds
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_COMMAND_TIMEOUT)
                .min(timeout);
            if let Some(left) = remaining_lifetime(session) {
                limit = limit.min(left.max(Duration::from_millis(1)));
            }
            let stdin = a.stdin.map(String::into_bytes);
            if stdin.is_some() && !provider.features().stdin {
                return Err(WharfError::new(
                    Code::InvalidInput,
                    "this provider does not accept stdin",
                ));
            }
            let output = output.filter(|_| a.stream != Some(false));
            let r = sandbox
                .exec_streamed(a.command, stdin, limit, MAX_COMMAND_OUTPUT, output)
                .await?;
            Ok(ok(json!({
                "exit_code": r.exit_code,
                "stdout": String::from_utf8_lossy(&r.stdout),
                "stderr": String::from_utf8_lossy(&r.stderr),
                "stdout_truncated": r.stdout_truncated,
                "stderr_truncated": r.stderr_truncated,
                "timed_out": r.timed_out,
            })))
        }
        "read_file" => {
            let a: ReadFile = args(arguments)?;
            let bytes = sandbox.read(&a.path).await?;
            match String::from_utf8(bytes) {
                Ok(text) => {
                    let (content, start, end, total) =
                        shell::select_lines(&text, a.offset, a.limit);
                    Ok(ok(
                        json!({"path": a.path, "content": content, "start_line": start, "end_line": end, "total_lines": total}),
                    ))
                }
                Err(e) => Ok(ok(json!({
                    "path": a.path,
                    "encoding": "base64",
                    "content": base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
                    "note": "the file is not UTF-8 text; offset and limit do not apply",
                }))),
            }
        }
        "write_file" => {
            let a: WriteFile = args(arguments)?;
            let content = match a.encoding.as_deref().unwrap_or("utf-8") {
                "utf-8" => a.content.into_bytes(),
                "base64" => base64::engine::general_purpose::STANDARD
                    .decode(a.content.as_bytes())
                    .map_err(|e| {
                        WharfError::new(
                            Code::InvalidInput,
                            format!("content is not valid base64: {e}"),
                        )
                    })?,
                other => {
                    return Err(WharfError::new(
                        Code::InvalidInput,
                        format!("unknown encoding `{other}`"),
                    ));
                }
            };
            let written = content.len();
            sandbox.write(&a.path, content).await?;
            Ok(ok(json!({"path": a.path, "bytes_written": written})))
        }
        "list_directory" => {
            let a: ListDirectory = args(arguments)?;
            let path = a.path.unwrap_or_else(|| ".".to_string());
            let entries = sandbox.list(&path).await?;
            Ok(ok(json!({"path": path, "entries": entries})))
        }
        "str_replace" => {
            let a: StrReplace = args(arguments)?;
            let bytes = sandbox.read(&a.path).await?;
            let text = String::from_utf8(bytes).map_err(|_| {
                WharfError::new(
                    Code::InvalidInput,
                    format!("`{}` is not UTF-8 text", a.path),
                )
            })?;
            let count = text.matches(&a.old).count();
            if count != 1 {
                return Err(WharfError::new(
                    Code::BusinessFailure,
                    format!(
                        "`old` occurs {count} times in `{}`; it must occur exactly once",
                        a.path
                    ),
                ));
            }
            sandbox
                .write(&a.path, text.replacen(&a.old, &a.new, 1).into_bytes())
                .await?;
            Ok(ok(json!({"path": a.path, "replacements": 1})))
        }
        "export_file" => {
            let a: PathOnly = args(arguments)?;
            let content = export(&sandbox, &a.path).await?;
            Ok(ok(json!({
                "path": a.path,
                "size": content.len(),
                "sha256": hex::encode(Sha256::digest(&content)),
                "content_base64": base64::engine::general_purpose::STANDARD.encode(&content),
            })))
        }
        other => match super::process_tools::call(&sandbox, other, arguments, timeout).await {
            Some(result) => result,
            None => Err(WharfError::invalid_request(format!(
                "unknown sandbox tool `{other}`"
            ))),
        },
    }
}

/// Largest file `export_file` returns inside a tool result (base64 in JSON); larger files
/// stream through `GET /v1/sessions/{id}/files?path=`.
pub const MAX_EXPORT_BYTES: u64 = 64 << 20;

/// Refuses a size (as the sandbox reports it, so hostile) over [`MAX_EXPORT_BYTES`].
fn check_export_size(path: &str, size: u64) -> Result<(), WharfError> {
    if size > MAX_EXPORT_BYTES {
        return Err(WharfError::new(
            Code::InvalidInput,
            format!(
                "`{path}` is {size} bytes; export_file returns at most {} MiB: stream it with GET /v1/sessions/{{id}}/files?path=",
                MAX_EXPORT_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// Reads a whole file slice by slice. The reported size only bounds the work: memory
/// grows with what actually arrives, never with what the sandbox claims.
pub async fn export(sandbox: &Sandbox<'_>, path: &str) -> Result<Vec<u8>, WharfError> {
    let size = sandbox.size(path).await?;
    check_export_size(path, size)?;
    let changed = |read: usize| {
        WharfError::new(
            Code::ExecutionError,
            format!("`{path}` changed while it was exported ({size} bytes expected, {read} read)"),
        )
    };
    let mut content = Vec::new();
    let slices = size.div_ceil(shell::SLICE_BYTES);
    for index in 0..slices {
        let slice = sandbox.slice(path, index).await?;
        if content.len() as u64 + slice.len() as u64 > size {
            return Err(changed(content.len() + slice.len()));
        }
        content.extend(slice);
    }
    if content.len() as u64 != size {
        return Err(changed(content.len()));
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_size_past_the_cap_is_refused_before_anything_is_allocated() {
        let e = check_export_size("big", 1 << 40).unwrap_err();
        assert_eq!(e.code, Code::InvalidInput);
        assert!(e.message.contains("1099511627776 bytes"), "{}", e.message);
        assert_eq!(
            check_export_size("big", u64::MAX).unwrap_err().code,
            Code::InvalidInput
        );
        assert!(check_export_size("ok", MAX_EXPORT_BYTES).is_ok());
    }
}

//! `POST /api/sandboxes/{id}/v1/shell/exec`: runs `sh -c` in the sandbox's scratch dir, in
//! its own process group, keeping the tail of each stream; a timeout kills the whole group.

use super::{Shared, bad_request, not_found, parse, reply};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

#[derive(Deserialize)]
#[serde(default)]
struct ExecRequest {
    command: String,
    timeout_ms: u64,
    stdin_base64: Option<String>,
    max_output_bytes: usize,
}

impl Default for ExecRequest {
    fn default() -> Self {
        Self {
            command: String::new(),
            timeout_ms: 30_000,
            stdin_base64: None,
            max_output_bytes: 1 << 20,
        }
    }
}

pub(super) async fn exec(
    State(state): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Some((dir, env)) = state
        .sandboxes()
        .get(&id)
        .map(|s| (s.dir.path().to_path_buf(), s.env.clone()))
    else {
        return not_found(&id);
    };
    let request: ExecRequest = match parse(&body) {
        Ok(request) => request,
        Err(e) => return bad_request(e),
    };
    let stdin = match request
        .stdin_base64
        .as_deref()
        .map(|s| B64.decode(s))
        .transpose()
    {
        Ok(stdin) => stdin,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("stdin_base64: {e}")}),
            );
        }
    };
    match run(&request, stdin, dir, env).await {
        Ok(result) => reply(StatusCode::OK, result),
        Err(e) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": e.to_string()}),
        ),
    }
}

/// Runs `sh -c command` in its own process group; on timeout kills the whole group.
async fn run(
    request: &ExecRequest,
    stdin: Option<Vec<u8>>,
    dir: PathBuf,
    env: BTreeMap<String, String>,
) -> std::io::Result<Value> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&request.command)
        .current_dir(&dir)
        .envs(env)
        .env("HOME", &dir)
        .process_group(0)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id().unwrap_or(0);
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            // A command that does not read its stdin closes the pipe: not an error.
            let _ = pipe.write_all(&bytes).await;
        });
    }
    let max = request.max_output_bytes;
    let (out_pipe, err_pipe) = (child.stdout.take(), child.stderr.take());
    let mut readers =
        tokio::spawn(async move { tokio::join!(tail(out_pipe, max), tail(err_pipe, max)) });
    let deadline = Duration::from_millis(request.timeout_ms);
    // The deadline covers the pipes too: a background process holding them open is killed.
    // `readers` is awaited last, so a completed handle is never awaited twice.
    let finished = tokio::time::timeout(deadline, async {
        let status = child.wait().await;
        (status, (&mut readers).await.unwrap_or_default())
    })
    .await;
    let (exit_code, timed_out, ((out, out_cut), (err, err_cut))) = match finished {
        Ok((status, outputs)) => (status?.code(), false, outputs),
        Err(_) => {
            kill_group(pgid).await;
            let _ = child.wait().await;
            (None, true, readers.await.unwrap_or_default())
        }
    };
    Ok(json!({
        "exit_code": exit_code,
        "stdout_base64": B64.encode(out),
        "stderr_base64": B64.encode(err),
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
        "timed_out": timed_out,
    }))
}

async fn kill_group(pgid: u32) {
    if pgid == 0 {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pgid}")])
        .status()
        .await;
}

/// Reads a stream to its end, keeping only its last `max` bytes; true when some were dropped.
async fn tail(stream: Option<impl AsyncRead + Unpin>, max: usize) -> (Vec<u8>, bool) {
    let Some(mut stream) = stream else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > max.saturating_mul(2).max(64 * 1024) {
            let excess = kept.len() - max;
            kept.drain(..excess);
            cut = true;
        }
    }
    if kept.len() > max {
        let excess = kept.len() - max;
        kept.drain(..excess);
        cut = true;
    }
    (kept, cut)
}

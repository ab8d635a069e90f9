//! `Files`: a file operation, run by the files helper (`crate::file_helper`) as the
//! sandbox's user. The agent relays: the host's input frames to the helper's stdin, the
//! helper's stdout to the host as chunks (each waits for the host to take it, so a slow
//! host slows the helper rather than filling the agent's memory), then the helper's exit
//! as `Done` or an error carrying its reason. A host that leaves kills the helper.

use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{ReadHalf, pipe};
use tokio::time::timeout;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use wharf_sandbox_protocol::{
    Command, ErrorKind, FilesRequest, MAX_CHUNK_BYTES, ProcessSetup, Reply, Stream, valid_path,
};

use crate::file_helper::{self, EXIT_DENIED, EXIT_INVALID, EXIT_NOT_FOUND};
use crate::run::{Piped, kill_group, spawn_piped};
use crate::server::{Agent, Conn, IO_TIMEOUT, client_gone, error_reply};
use crate::spawn;

/// The most of the helper's reason kept for the reply.
const MAX_REASON_BYTES: usize = 4096;
/// How long the helper has to exit once its output ended.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Runs `request` and writes its replies to `conn`; the input, if any, is read from
/// `requests`.
pub async fn files(
    agent: &Agent,
    request: FilesRequest,
    conn: &mut Conn<'_>,
    requests: &mut FramedRead<ReadHalf<'_>, LengthDelimitedCodec>,
) {
    let helper = match start(agent, &request) {
        Ok(helper) => helper,
        Err(reply) => {
            let _ = conn.send(&reply).await;
            return;
        }
    };
    let pid = helper.pid;
    match relay(helper, &request, conn, requests).await {
        Some(reply) => {
            let _ = conn.send(&reply).await;
        }
        None => kill_group(pid),
    }
}

struct Helper {
    pid: u32,
    exit: tokio::sync::oneshot::Receiver<i32>,
    stdin: Option<pipe::Sender>,
    stdout: pipe::Receiver,
    reason: tokio::task::JoinHandle<Vec<u8>>,
}

fn start(agent: &Agent, request: &FilesRequest) -> Result<Helper, Reply> {
    if !valid_path(request.op.path()) {
        return Err(error_reply(
            ErrorKind::Invalid,
            "a file operation's path must be 1 to 4096 bytes, without NUL",
        ));
    }
    let Some(exe) = &agent.self_exe else {
        return Err(error_reply(
            ErrorKind::Failed,
            "file operations need the agent's own binary, which was not found",
        ));
    };
    let mut setup = ProcessSetup {
        user: request.user.clone(),
        ..ProcessSetup::default()
    };
    agent.with_default_user(&mut setup);
    let argv = vec![
        exe.to_string_lossy().into_owned(),
        file_helper::HELPER_FLAG.to_owned(),
        file_helper::encode_op(&request.op),
    ];
    let prepared = spawn::prepare(&Command::Argv(argv), &setup).map_err(Reply::Error)?;
    let Piped {
        pid,
        exit,
        stdout,
        mut stderr,
        stdin,
    } = spawn_piped(agent, &prepared, request.op.takes_input())?;
    let reason = tokio::spawn(async move {
        let mut kept = Vec::new();
        let mut piece = [0u8; 1024];
        // Read to the end (a helper must not block on a full pipe), keep the start.
        while let Ok(n) = stderr.read(&mut piece).await {
            if n == 0 {
                break;
            }
            let room = MAX_REASON_BYTES.saturating_sub(kept.len());
            kept.extend_from_slice(&piece[..n.min(room)]);
        }
        kept
    });
    Ok(Helper {
        pid,
        exit,
        stdin,
        stdout,
        reason,
    })
}

/// Relays until the helper is done; `None` when the host left (or broke the protocol).
async fn relay(
    mut helper: Helper,
    request: &FilesRequest,
    conn: &mut Conn<'_>,
    requests: &mut FramedRead<ReadHalf<'_>, LengthDelimitedCodec>,
) -> Option<Reply> {
    let mut input_lost = None;
    if request.op.takes_input() {
        let mut stdin = helper.stdin.take();
        loop {
            let frame = match timeout(IO_TIMEOUT, requests.next()).await {
                Ok(Some(Ok(frame))) => frame,
                // The host left, sent a bad frame, or stalled.
                _ => return None,
            };
            if frame.is_empty() {
                break;
            }
            if frame.len() > MAX_CHUNK_BYTES as usize {
                return Some(error_reply(
                    ErrorKind::Invalid,
                    format!("an input frame is larger than {MAX_CHUNK_BYTES} bytes"),
                ));
            }
            // A helper that stopped reading (it failed) has its reason read below; the
            // rest of the input is taken and dropped meanwhile.
            if let Some(pipe) = stdin.as_mut()
                && let Err(error) = pipe.write_all(&frame).await
            {
                input_lost = Some(error);
                stdin = None;
            }
        }
        drop(stdin);
    }
    let mut piece = vec![0u8; MAX_CHUNK_BYTES as usize];
    loop {
        let read = tokio::select! {
            read = helper.stdout.read(&mut piece) => read,
            () = client_gone(requests.get_ref()) => return None,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = Reply::Chunk {
                    stream: Stream::Stdout,
                    data: piece[..n].to_vec(),
                };
                // A watch waits for its host without limit: its events come when they come.
                if conn.send(&chunk).await.is_err() {
                    return None;
                }
            }
        }
    }
    let code = match timeout(EXIT_WAIT, &mut helper.exit).await {
        Ok(Ok(code)) => code,
        _ => return None,
    };
    let reason = helper.reason.await.unwrap_or_default();
    let reason = String::from_utf8_lossy(&reason).trim().to_owned();
    Some(match code {
        // A helper that took less than it was sent must not look like a whole write.
        0 if input_lost.is_some() => error_reply(
            ErrorKind::Failed,
            format!(
                "the input could not be handed to the files helper: {}",
                input_lost.map(|e| e.to_string()).unwrap_or_default()
            ),
        ),
        0 => Reply::Done,
        code => {
            let kind = match u8::try_from(code) {
                Ok(EXIT_INVALID) => ErrorKind::Invalid,
                Ok(EXIT_NOT_FOUND) => ErrorKind::NotFound,
                Ok(EXIT_DENIED) => ErrorKind::Denied,
                _ => ErrorKind::Failed,
            };
            let reason = if reason.is_empty() {
                format!("the file operation failed (exit {code})")
            } else {
                reason
            };
            error_reply(kind, reason)
        }
    })
}

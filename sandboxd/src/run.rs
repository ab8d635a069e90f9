//! `Run`: a command to completion, with its stdout and stderr tails, a timeout that kills
//! its whole process group, and optionally its output streamed as it comes.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::ReadHalf;
use tokio::net::unix::pipe;
use tokio::time::{Instant, sleep_until};
use wharf_sandbox_protocol::{
    ErrorKind, MAX_CHUNK_BYTES, MAX_RUN_OUTPUT_BYTES, MAX_RUN_STDIN_BYTES, Reply, RunOutput,
    RunRequest, Stream,
};

use crate::ring::Ring;
use crate::server::{Agent, Conn, client_gone, error_reply};
use crate::spawn::{self, Prepared};

/// How long output is still read after the command exited (a backgrounded grandchild may
/// hold the pipes open forever).
pub const DRAIN: Duration = Duration::from_millis(200);
/// How long after the timeout's SIGKILL the run ends even if no exit was seen.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The size of each read from a pipe.
pub const READ_PIECE: usize = 64 * 1024;

/// Runs `request` and writes its replies to `conn`; `peer` tells when the client leaves
/// (the process group is then killed, and nothing more is written).
pub async fn run(agent: &Agent, request: RunRequest, conn: &mut Conn<'_>, peer: &ReadHalf<'_>) {
    let reply = match start(agent, &request) {
        Ok(started) => match supervise(started, &request, conn, peer).await {
            Some(output) => Reply::Ran(output),
            None => return,
        },
        Err(reply) => reply,
    };
    let _ = conn.send(&reply).await;
}

/// A started run.
struct Started {
    pid: u32,
    exit: tokio::sync::oneshot::Receiver<i32>,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
    stdin_writer: Option<tokio::task::JoinHandle<()>>,
}

/// Validates and spawns; the error is the reply.
fn start(agent: &Agent, request: &RunRequest) -> Result<Started, Reply> {
    if request.timeout_ms == 0 {
        return Err(error_reply(ErrorKind::Invalid, "timeout_ms must be > 0"));
    }
    if request.max_output_bytes > MAX_RUN_OUTPUT_BYTES {
        return Err(error_reply(
            ErrorKind::Invalid,
            format!("max_output_bytes is above {MAX_RUN_OUTPUT_BYTES}"),
        ));
    }
    if request
        .stdin
        .as_ref()
        .is_some_and(|s| s.len() > MAX_RUN_STDIN_BYTES)
    {
        return Err(error_reply(
            ErrorKind::Invalid,
            format!("stdin is longer than {MAX_RUN_STDIN_BYTES} bytes"),
        ));
    }
    let prepared = spawn::prepare(&request.command, &request.setup).map_err(Reply::Error)?;
    let Piped {
        pid,
        exit,
        stdout,
        stderr,
        stdin,
    } = spawn_piped(agent, &prepared, request.stdin.is_some())?;
    let stdin_writer = match (stdin, request.stdin.clone()) {
        (Some(mut stdin), Some(data)) => Some(tokio::spawn(async move {
            // A child that stops reading must not hold up the run: this task is aborted
            // when the run ends; dropping `stdin` closes it.
            let _ = stdin.write_all(&data).await;
        })),
        _ => None,
    };
    Ok(Started {
        pid,
        exit,
        stdout,
        stderr,
        stdin_writer,
    })
}

/// A child spawned with its output, and maybe its input, piped to the agent.
pub struct Piped {
    /// Its pid (and process group).
    pub pid: u32,
    /// Its exit code, once reaped.
    pub exit: tokio::sync::oneshot::Receiver<i32>,
    /// Its stdout.
    pub stdout: pipe::Receiver,
    /// Its stderr.
    pub stderr: pipe::Receiver,
    /// Its stdin, when asked for (else it reads `/dev/null`).
    pub stdin: Option<pipe::Sender>,
}

/// Spawns `prepared` as the leader of a process group of its own, stdout and stderr piped,
/// stdin piped when `with_stdin`; the error is the reply.
pub fn spawn_piped(agent: &Agent, prepared: &Prepared, with_stdin: bool) -> Result<Piped, Reply> {
    let mut command = prepared.command();
    command
        .stdin(if with_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let spawned = agent
        .reaper
        .spawn_in(&mut command, prepared.spawn_dir())
        .map_err(|e| Reply::Error(prepared.spawn_error(&e)))?;
    drop(command);
    let pid = spawned.pid;
    let mut child = spawned.child;
    let pipes = (|| -> io::Result<_> {
        let stdout = child.stdout.take().ok_or_else(missing_pipe)?;
        let stderr = child.stderr.take().ok_or_else(missing_pipe)?;
        let stdout = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))?;
        let stderr = pipe::Receiver::from_owned_fd(OwnedFd::from(stderr))?;
        let stdin = match child.stdin.take() {
            Some(stdin) => Some(pipe::Sender::from_owned_fd(OwnedFd::from(stdin))?),
            None => None,
        };
        Ok((stdout, stderr, stdin))
    })();
    match pipes {
        Ok((stdout, stderr, stdin)) => Ok(Piped {
            pid,
            exit: spawned.exit,
            stdout,
            stderr,
            stdin,
        }),
        Err(error) => {
            kill_group(pid);
            Err(error_reply(
                ErrorKind::Failed,
                format!("cannot read the child's output: {error}"),
            ))
        }
    }
}

fn missing_pipe() -> io::Error {
    io::Error::other("a pipe of the child is missing")
}

/// Reads the output until the command exits (or times out) and the pipes close (or
/// [`DRAIN`] passes); `None` when the client left.
async fn supervise(
    mut started: Started,
    request: &RunRequest,
    conn: &mut Conn<'_>,
    peer: &ReadHalf<'_>,
) -> Option<RunOutput> {
    let capacity = request.max_output_bytes as usize;
    let mut tails = [Ring::new(capacity), Ring::new(capacity)];
    let mut pipes = [Some(started.stdout), Some(started.stderr)];
    let mut buffers = [vec![0u8; READ_PIECE], vec![0u8; READ_PIECE]];
    let deadline = Instant::now() + Duration::from_millis(u64::from(request.timeout_ms));
    let mut exit_code = None;
    let mut exited = false;
    let mut timed_out = false;
    let mut end: Option<Instant> = None;
    let gone = client_gone(peer);
    tokio::pin!(gone);
    let finished = loop {
        if exited && pipes.iter().all(Option::is_none) {
            break true;
        }
        let [out_pipe, err_pipe] = &mut pipes;
        let [out_buf, err_buf] = &mut buffers;
        let (index, read) = tokio::select! {
            biased;
            () = &mut gone => break false,
            code = &mut started.exit, if !exited => {
                exited = true;
                exit_code = code.ok();
                let drained = Instant::now() + DRAIN;
                end = Some(end.map_or(drained, |end| end.min(drained)));
                continue;
            }
            () = sleep_until(deadline), if !exited && !timed_out => {
                kill_group(started.pid);
                timed_out = true;
                end = Some(Instant::now() + KILL_GRACE);
                continue;
            }
            () = sleep_until(end.unwrap_or(deadline)), if end.is_some() => break true,
            read = read_some(out_pipe, out_buf) => (0, read),
            read = read_some(err_pipe, err_buf) => (1, read),
        };
        let n = match read {
            Ok(n) if n > 0 => n,
            _ => {
                pipes[index] = None;
                continue;
            }
        };
        let piece = &buffers[index][..n];
        tails[index].push(piece);
        if request.stream {
            let stream = if index == 0 {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            let mut sent = Ok(());
            for data in piece.chunks(MAX_CHUNK_BYTES as usize) {
                let chunk = Reply::Chunk {
                    stream,
                    data: data.to_vec(),
                };
                sent = send_enforcing_deadline(
                    conn,
                    &chunk,
                    (!exited).then_some(deadline),
                    started.pid,
                    &mut timed_out,
                )
                .await;
                if sent.is_err() {
                    break;
                }
            }
            if timed_out && end.is_none() {
                end = Some(Instant::now() + KILL_GRACE);
            }
            if sent.is_err() {
                // The client left or stopped reading: as if it had hung up.
                break false;
            }
        }
    };
    if let Some(writer) = started.stdin_writer.take() {
        writer.abort();
    }
    if !finished {
        kill_group(started.pid);
        return None;
    }
    let [stdout, stderr] = tails;
    Some(RunOutput {
        exit_code: if timed_out { None } else { exit_code },
        stdout_truncated: stdout.truncated(),
        stderr_truncated: stderr.truncated(),
        stdout: stdout.to_vec(),
        stderr: stderr.to_vec(),
        timed_out,
    })
}

/// Reads one piece from a pipe that is still open; never resolves for a closed one.
async fn read_some(pipe: &mut Option<pipe::Receiver>, buffer: &mut [u8]) -> io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buffer).await,
        None => std::future::pending().await,
    }
}

/// Sends a chunk; a slow client does not stop the timeout (it kills the group meanwhile).
async fn send_enforcing_deadline(
    conn: &mut Conn<'_>,
    reply: &Reply,
    deadline: Option<Instant>,
    pid: u32,
    timed_out: &mut bool,
) -> io::Result<()> {
    let send = conn.send(reply);
    tokio::pin!(send);
    loop {
        tokio::select! {
            result = &mut send => return result,
            () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() && !*timed_out => {
                kill_group(pid);
                *timed_out = true;
            }
        }
    }
}

/// SIGKILL to the process group `pid` leads.
pub fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        // It may be gone already.
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
}

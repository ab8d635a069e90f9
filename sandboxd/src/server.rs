//! The socket: binding it, accepting at most [`MAX_CONNECTIONS`] connections at once, and
//! each connection's frames (one request in, replies out, then close; or, for a port or
//! egress relay, one `Connected` frame and then raw bytes).
//!
//! Everything that arrives here is hostile: frames are bounded by the codec, a request
//! must arrive within [`IO_TIMEOUT`], and a frame that does not decode is answered with
//! an `Invalid` error.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rustix::fs::Mode;
use tokio::io::Interest;
use tokio::net::unix::{ReadHalf, WriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tokio_util::bytes::Bytes;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use wharf_sandbox_protocol::{
    ErrorKind, MAX_CONNECTIONS, MAX_FRAME_BYTES, Reply, Request, VERSION, decode, encode,
};

use crate::egress::{self, Egress};
use crate::processes::Processes;
use crate::reaper::Reaper;
use crate::relay::{self, Relays};
use crate::{refuse, run};

/// How long a client has to send its request, and to take each reply frame.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed accept (out of descriptors, say), before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How often a run whose client half-closed its socket checks for a full close.
const HANGUP_POLL: Duration = Duration::from_millis(250);

/// What every connection shares.
pub struct Agent {
    /// Spawns children and collects their exits.
    pub reaper: Reaper,
    /// The background processes.
    pub processes: Processes,
    /// The agent's own binary (the terminal helper), when it could be found.
    pub self_exe: Option<PathBuf>,
    /// Who a command that names no user runs as (`--user`); `None`: the agent's own user.
    pub default_user: Option<String>,
    /// The port relays' slots.
    pub relays: Relays,
    /// The egress listener (`--egress-port`) and its slots; `None` without one.
    pub egress: Option<Egress>,
}

impl Agent {
    /// `setup` with the default user filled in when it names none.
    pub fn with_default_user(&self, setup: &mut wharf_sandbox_protocol::ProcessSetup) {
        if setup.user.is_none() {
            setup.user.clone_from(&self.default_user);
        }
    }
}

/// Binds the socket: its directory made if missing (0700), a stale socket removed, the
/// socket itself 0600.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() || meta.is_file() || meta.is_symlink() => {
            fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        Err(_) => {}
    }
    // No window in which the socket is open to others: the umask covers bind itself.
    let previous = rustix::process::umask(Mode::from_raw_mode(0o077));
    let listener = UnixListener::bind(path);
    rustix::process::umask(previous);
    let listener = listener?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts connections forever, each served in its own task.
pub async fn serve(listener: UnixListener, agent: Arc<Agent>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        // Past the limit, connections wait in the listen backlog.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let agent = agent.clone();
                tokio::spawn(async move {
                    serve_connection(stream, &agent).await;
                    drop(slot);
                });
            }
            Err(error) => {
                eprintln!("wharf-sandboxd: accept failed: {error}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// One connection: one request, its replies, close (or a port or egress relay).
async fn serve_connection(mut stream: UnixStream, agent: &Agent) {
    let (read, write) = stream.split();
    let mut requests = FramedRead::new(read, codec());
    let mut conn = Conn {
        frames: FramedWrite::new(write, codec()),
    };
    let frame = match timeout(IO_TIMEOUT, requests.next()).await {
        Ok(Some(Ok(frame))) => frame,
        Ok(None) => return,
        Ok(Some(Err(error))) => {
            let _ = conn
                .send(&error_reply(
                    ErrorKind::Invalid,
                    format!("bad frame: {error}"),
                ))
                .await;
            return;
        }
        Err(_) => {
            let _ = conn
                .send(&error_reply(ErrorKind::Invalid, "no request within 10 s"))
                .await;
            return;
        }
    };
    let request = match decode::<Request>(&frame) {
        Ok(request) => request,
        Err(error) => {
            let _ = conn
                .send(&error_reply(ErrorKind::Invalid, error.to_string()))
                .await;
            return;
        }
    };
    drop(frame);
    // A relay's request leaves this block with its TCP connection; every other request
    // is answered and ends here.
    let opened = 'relay: {
        let reply = match request {
            Request::Hello => Reply::Hello {
                version: VERSION,
                pid: std::process::id(),
            },
            Request::Run(mut run) => {
                agent.with_default_user(&mut run.setup);
                // Run writes its own replies (chunks, then the end).
                run::run(agent, run, &mut conn, requests.get_ref()).await;
                return;
            }
            Request::Start(mut start) => {
                agent.with_default_user(&mut start.setup);
                agent.processes.start(agent, start)
            }
            Request::Output(output) => agent.processes.output(output).await,
            Request::Input { pid, data, close } => agent.processes.input(pid, data, close).await,
            Request::Signal { pid, signal } => agent.processes.signal(pid, signal),
            Request::Resize { pid, size } => agent.processes.resize(pid, size),
            Request::Wait { pid, timeout_ms } => agent.processes.wait(pid, timeout_ms).await,
            Request::List => agent.processes.list(),
            Request::Connect { port } | Request::ConnectHandOver { port } => {
                let hand = matches!(request, Request::ConnectHandOver { .. });
                match relay::open(&agent.relays, port).await {
                    Ok(opened) => {
                        let host = requests.get_ref();
                        if hand && relay::hand_over(host.as_ref(), &opened).await {
                            // The host has the connection; the slot is its until it closes
                            // this one (it sends nothing more on it).
                            let _slot = opened.into_slot();
                            client_gone(host).await;
                            return;
                        }
                        break 'relay opened;
                    }
                    Err(reply) => reply,
                }
            }
            Request::Files(files) => {
                // Files writes its own replies (output chunks, then the end).
                crate::files::files(agent, files, &mut conn, &mut requests).await;
                return;
            }
            Request::EgressWait | Request::EgressHandOver => {
                let hand = matches!(request, Request::EgressHandOver);
                match egress::wait(agent.egress.as_ref(), requests.get_ref()).await {
                    Some(Ok(opened)) => {
                        if hand && relay::hand_over(requests.get_ref().as_ref(), &opened).await {
                            return;
                        }
                        break 'relay opened;
                    }
                    Some(Err(reply)) => reply,
                    // The host went away while waiting.
                    None => return,
                }
            }
        };
        let _ = conn.send(&reply).await;
        return;
    };
    if conn.send(&Reply::Connected).await.is_err() {
        return;
    }
    // The framing ends here: what the reader holds past the request is relayed.
    let buffered = requests.into_parts().read_buf;
    drop(conn);
    relay::relay(opened, stream, &buffered).await;
}

/// The writing side of a connection.
pub struct Conn<'a> {
    frames: FramedWrite<WriteHalf<'a>, LengthDelimitedCodec>,
}

impl Conn<'_> {
    /// Sends one reply frame; a client that does not take it within [`IO_TIMEOUT`] is an
    /// error.
    pub async fn send(&mut self, reply: &Reply) -> io::Result<()> {
        let mut frame = encode(reply);
        if frame.len() > MAX_FRAME_BYTES {
            frame = encode(&error_reply(
                ErrorKind::Failed,
                "the reply would be larger than a frame",
            ));
        }
        match timeout(IO_TIMEOUT, self.frames.send(Bytes::from(frame))).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read its reply",
            )),
        }
    }
}

/// A [`Reply::Error`].
pub fn error_reply(kind: ErrorKind, message: impl Into<String>) -> Reply {
    Reply::Error(refuse(kind, message))
}

/// Resolves when the client has gone: closed its socket (or the socket failed). A client
/// that only shut down its writing side still wants the answer; extra bytes are ignored.
pub async fn client_gone(peer: &ReadHalf<'_>) {
    let mut scratch = [0u8; 256];
    loop {
        if peer.readable().await.is_err() {
            return;
        }
        match peer.try_read(&mut scratch) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
    // End of stream: a half-close or a close.
    hung_up(peer.as_ref()).await;
}

/// Resolves when the client has closed its socket (both ways) or the socket failed,
/// without reading from it: bytes it sends meanwhile stay for whoever reads next.
pub async fn hung_up(stream: &UnixStream) {
    // On a Unix socket only a full close of the peer hangs up our writing side.
    loop {
        match stream.ready(Interest::WRITABLE).await {
            Ok(ready) if ready.is_write_closed() => return,
            Ok(_) => tokio::time::sleep(HANGUP_POLL).await,
            Err(_) => return,
        }
    }
}

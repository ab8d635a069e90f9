//! What the end-to-end tests share: the built agent on a temporary socket, and the host's
//! side of the protocol (framed calls, and the frame-exact opening of a raw relay).

// Each test crate includes this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_util::bytes::Bytes;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use wharf_sandbox_protocol::{ErrorKind, MAX_FRAME_BYTES, Reply, Request, decode, encode};

/// The agent's binary.
pub const BINARY: &str = env!("CARGO_BIN_EXE_wharf-sandboxd");

/// A running agent on its own socket; killed when dropped.
pub struct Agent {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
}

impl Agent {
    pub fn start() -> Agent {
        Agent::start_with(&[], &[])
    }

    /// An agent with extra arguments (before any `--`) and environment variables.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Agent {
        let dir = temp_dir("sbd-test");
        // The agent makes the socket's directory itself (0700).
        let socket = dir.join("run").join("agent.sock");
        let child = StdCommand::new(BINARY)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !socket.exists() {
            assert!(started.elapsed() < Duration::from_secs(10), "no socket");
            std::thread::sleep(Duration::from_millis(10));
        }
        Agent { child, dir, socket }
    }

    pub async fn call(&self, request: &Request) -> Reply {
        call(&self.socket, request).await
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh path under the temporary directory, unique to this process and call.
pub fn temp_dir(prefix: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// A connection to the agent's socket. The socket file appears at `bind`, a moment before
/// the agent listens on it, so a refusal is retried for up to 5 s.
pub async fn connect(socket: &Path) -> Framed<UnixStream, LengthDelimitedCodec> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match UnixStream::connect(socket).await {
            Ok(stream) => return Framed::new(stream, codec()),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("connecting to the agent at {}: {e}", socket.display()),
        }
    }
}

/// Every reply to `request`, until the agent closes.
pub async fn exchange(socket: &Path, request: &Request) -> Vec<Reply> {
    let mut framed = connect(socket).await;
    framed.send(Bytes::from(encode(request))).await.unwrap();
    let mut replies = Vec::new();
    let read_all = async {
        while let Some(frame) = framed.next().await {
            replies.push(decode::<Reply>(&frame.unwrap()).unwrap());
        }
    };
    tokio::time::timeout(Duration::from_secs(70), read_all)
        .await
        .expect("the agent did not finish its reply");
    replies
}

/// The one reply to `request`.
pub async fn call(socket: &Path, request: &Request) -> Reply {
    let mut replies = exchange(socket, request).await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    replies.remove(0)
}

pub fn error_kind(reply: &Reply) -> ErrorKind {
    match reply {
        Reply::Error(error) => error.kind,
        other => panic!("not an error: {other:?}"),
    }
}

/// Writes `request` as one frame on a new connection, `early` right behind it, like the
/// host opening a relay.
pub async fn send_raw(socket: &Path, request: &Request, early: &[u8]) -> UnixStream {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    let payload = encode(request);
    let mut bytes = (payload.len() as u32).to_be_bytes().to_vec();
    bytes.extend(payload);
    bytes.extend_from_slice(early);
    stream.write_all(&bytes).await.unwrap();
    stream
}

/// Reads one reply frame exactly (length prefix, then payload; nothing past it).
pub async fn read_reply(stream: &mut UnixStream) -> Reply {
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).await.unwrap();
    let mut frame = vec![0; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut frame).await.unwrap();
    decode::<Reply>(&frame).unwrap()
}

/// [`send_raw`], then the one reply frame, which must come within 10 s.
pub async fn open_raw(socket: &Path, request: &Request, early: &[u8]) -> (UnixStream, Reply) {
    let mut stream = send_raw(socket, request, early).await;
    let reply = tokio::time::timeout(Duration::from_secs(10), read_reply(&mut stream))
        .await
        .unwrap_or_else(|_| panic!("no reply to {request:?}"));
    (stream, reply)
}

/// Writes `data` to a relay (or a handed-over connection) and reads as many bytes back.
pub async fn echoed<S: AsyncRead + AsyncWrite + Unpin>(relay: &mut S, data: &[u8]) -> Vec<u8> {
    let (mut read, mut write) = tokio::io::split(relay);
    let mut back = vec![0; data.len()];
    let (written, read) = tokio::time::timeout(
        Duration::from_secs(10),
        futures::future::join(write.write_all(data), read.read_exact(&mut back)),
    )
    .await
    .expect("no echo");
    written.unwrap();
    read.unwrap();
    back
}

/// Reads the reply to a hand-over (`EgressHandOver`, `ConnectHandOver`) with `recvmsg`:
/// the reply (`Connected`, or a refusal) and the descriptor that came with it, if one did.
pub fn handed_over(host: &std::os::unix::net::UnixStream) -> (Reply, Option<std::os::fd::OwnedFd>) {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::mem::MaybeUninit;
    host.set_nonblocking(false).unwrap();
    host.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut frame = [0u8; 1024];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        host,
        &mut [std::io::IoSliceMut::new(&mut frame)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .unwrap();
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(got.bytes, 4 + len, "the whole frame comes in one piece");
    let mut descriptor = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message {
            descriptor = fds.next();
        }
    }
    let reply = wharf_sandbox_protocol::decode::<Reply>(&frame[4..got.bytes]).unwrap();
    (reply, descriptor)
}

/// A handed-over descriptor as a tokio TCP stream.
pub fn tcp_of(fd: std::os::fd::OwnedFd) -> tokio::net::TcpStream {
    let tcp = std::net::TcpStream::from(fd);
    tcp.set_nonblocking(true).unwrap();
    tokio::net::TcpStream::from_std(tcp).unwrap()
}

//! One request to a container's sandbox agent: over its Unix socket (connect, then check
//! that the process listening is the container's: the socket's peer credentials against
//! the engine's view of the container, its PID 1, or under gVisor its runtime) or over the
//! container's engine link (`agent_link`, which makes the same check inside); send one
//! frame, read the agent's chunks and its final reply within a time limit. Everything read
//! is bounded by the protocol's frame limit; a frame that does not decode ends the request.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use wharf_sandbox_protocol::{ErrorKind, MAX_FRAME_BYTES, Reply, Request, Stream, decode, encode};

use super::agent_link::EngineLink;
use super::agent_stream::{AgentFailure, AgentStream};
use super::hand_over::{HandedOver, HandedOverPort, await_hand_over};
use super::relay_frames::{connected, reply_length, request_frame};
use crate::egress_proxy::ProgramConnection;

/// The send buffer of the host's end of an egress relay (the kernel allows twice this
/// queued, within `net.core.wmem_max`).
const EGRESS_SEND_BUFFER: usize = 1 << 20;

/// How this host reaches a container's agent, and who must answer.
#[derive(Debug, Clone)]
pub(crate) enum AgentEndpoint {
    /// A socket on this host's filesystem.
    Socket {
        /// The socket's path on this host.
        socket: PathBuf,
        /// The process that must hold the socket.
        peer: ExpectedPeer,
    },
    /// The container's engine link.
    Engine(Arc<EngineLink>),
}

impl AgentEndpoint {
    /// Whether the endpoint can still be used as remembered (an engine link whose exec
    /// ended must be started again).
    pub(crate) fn is_current(&self) -> bool {
        match self {
            AgentEndpoint::Socket { .. } => true,
            AgentEndpoint::Engine(link) => link.is_alive(),
        }
    }
}

impl PartialEq for AgentEndpoint {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                AgentEndpoint::Socket { socket, peer },
                AgentEndpoint::Socket {
                    socket: other_socket,
                    peer: other_peer,
                },
            ) => socket == other_socket && peer == other_peer,
            (AgentEndpoint::Engine(a), AgentEndpoint::Engine(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for AgentEndpoint {}

/// Who holds a container's agent socket, as this host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpectedPeer {
    /// The container's PID 1 itself (the engine's `State.Pid`): the agent, listening in a
    /// tmpfs of the container's own.
    Pid(i32),
    /// A child of this process, the container's runtime shim: under gVisor the container's
    /// gofer creates the agent's socket on the host, so the socket proves the container's
    /// sandbox answers, not which process inside it.
    ChildOf(i32),
}

impl ExpectedPeer {
    fn admits(self, pid: Option<i32>) -> bool {
        match (self, pid) {
            (ExpectedPeer::Pid(want), Some(pid)) => pid == want,
            (ExpectedPeer::ChildOf(parent), Some(pid)) => parent_of(pid) == Some(parent),
            (_, None) => false,
        }
    }
}

/// The parent of process `pid` (`/proc/PID/stat`, field 4, after the command's last `)`).
pub(crate) fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Connects to the agent's socket and checks who holds it, before anything is sent.
async fn connect_socket(
    socket: &PathBuf,
    expected: ExpectedPeer,
) -> Result<UnixStream, AgentFailure> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(AgentFailure::Unreachable)?;
    let peer = stream
        .peer_cred()
        .map_err(|e| AgentFailure::Broken(format!("reading the peer's credentials: {e}")))?;
    if !expected.admits(peer.pid()) {
        return Err(AgentFailure::Impostor(peer.pid()));
    }
    Ok(stream)
}

/// One checked connection to the agent, however it is reached.
async fn connect_checked(endpoint: &AgentEndpoint) -> Result<AgentStream, AgentFailure> {
    match endpoint {
        AgentEndpoint::Socket { socket, peer } => {
            Ok(Box::new(connect_socket(socket, *peer).await?))
        }
        AgentEndpoint::Engine(link) => link.open().await,
    }
}

/// Opens a connection to TCP `port` on the sandbox's loopback: the stream, once the agent
/// has answered `Connected`, carries the port's bytes both ways. An agent on this host's
/// filesystem hands the connection itself over (`Request::ConnectHandOver`), so the bytes
/// skip the agent; over the engine link, under a runtime that drops the descriptor, or
/// with an agent that predates hand-overs, the agent relays.
pub(crate) async fn open_relay(
    endpoint: &AgentEndpoint,
    port: u16,
    limit: Duration,
) -> Result<AgentStream, AgentFailure> {
    let no_answer = |_| AgentFailure::Broken(format!("no answer within {} ms", limit.as_millis()));
    if let AgentEndpoint::Socket { socket, peer } = endpoint {
        let stream = connect_socket(socket, *peer).await?;
        let handed = tokio::time::timeout(
            limit,
            await_hand_over(stream, &Request::ConnectHandOver { port }),
        )
        .await
        .map_err(no_answer)?;
        match handed {
            Ok(HandedOver::Socket { tcp, agent }) => {
                return Ok(Box::new(HandedOverPort::new(tcp, agent)));
            }
            Ok(HandedOver::Relayed(stream)) => return Ok(Box::new(stream)),
            // An agent an earlier host started does not know the request: it relays.
            Err(AgentFailure::Refused(e)) if e.kind == ErrorKind::Invalid => {}
            Err(failure) => return Err(failure),
        }
    }
    let mut stream = connect_checked(endpoint).await?;
    tokio::time::timeout(limit, relay_answer(&mut stream, &Request::Connect { port }))
        .await
        .map_err(no_answer)??;
    Ok(stream)
}

/// Waits, as long as it takes, for the next connection a program in the sandbox makes to
/// the agent's egress listener: the stream then carries that program's bytes both ways.
/// With `hand_over`, an agent on this host's filesystem is asked to hand the program's
/// connection itself over (`hand_over`), so its bytes skip the agent; the agent
/// relays where it cannot. Dropping the future (or the stream) gives the agent's slot back.
pub(crate) async fn await_egress(
    endpoint: &AgentEndpoint,
    hand_over: bool,
) -> Result<ProgramConnection, AgentFailure> {
    let mut stream: AgentStream = match endpoint {
        AgentEndpoint::Socket { socket, peer } => {
            let stream = connect_socket(socket, *peer).await?;
            // Downloads the agent relays flow host → agent on this socket: with the
            // kernel's default (208 KiB) the proxy and the agent wake each other per
            // 200 KiB, and a 100 MB download ran at 0.6× a direct one; measured with 1 MiB,
            // 0.8× (docs/benchmarks.md). What it may pin is in the resource ledger.
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(EGRESS_SEND_BUFFER);
            if hand_over {
                return Ok(
                    match await_hand_over(stream, &Request::EgressHandOver).await? {
                        HandedOver::Socket { tcp, .. } => ProgramConnection::Socket(tcp),
                        HandedOver::Relayed(stream) => ProgramConnection::Relayed(Box::new(stream)),
                    },
                );
            }
            Box::new(stream)
        }
        AgentEndpoint::Engine(link) => link.open().await?,
    };
    relay_answer(&mut stream, &Request::EgressWait).await?;
    Ok(ProgramConnection::Relayed(stream))
}

/// Sends a relay request and reads the agent's `Connected` frame-exact (length, then
/// payload), so no relayed byte is taken with it.
async fn relay_answer(stream: &mut AgentStream, request: &Request) -> Result<(), AgentFailure> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream
        .write_all(&request_frame(request)?)
        .await
        .map_err(|e| AgentFailure::Broken(format!("sending: {e}")))?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(|e| AgentFailure::Broken(format!("reading: {e}")))?;
    let mut payload = vec![0u8; reply_length(len)?];
    stream
        .read_exact(&mut payload)
        .await
        .map_err(|e| AgentFailure::Broken(format!("reading: {e}")))?;
    connected(&payload)
}

/// The agent's framed connection, with `request` sent: for an exchange its caller drives
/// (a file operation's input and output).
pub(crate) async fn open_framed(
    endpoint: &AgentEndpoint,
    request: &Request,
) -> Result<Framed<AgentStream, LengthDelimitedCodec>, AgentFailure> {
    let stream = connect_checked(endpoint).await?;
    let mut framed = Framed::new(stream, codec());
    framed
        .send(Bytes::from(encode(request)))
        .await
        .map_err(|e| AgentFailure::Broken(format!("sending: {e}")))?;
    Ok(framed)
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Sends `request` and returns the agent's final reply; streamed output chunks go to
/// `on_chunk` as they arrive. `limit` bounds the whole exchange.
pub(crate) async fn call(
    endpoint: &AgentEndpoint,
    request: &Request,
    limit: Duration,
    mut on_chunk: impl FnMut(Stream, Vec<u8>) + Send,
) -> Result<Reply, AgentFailure> {
    let stream = connect_checked(endpoint).await?;
    let mut framed = Framed::new(stream, codec());
    let exchange = async {
        framed
            .send(Bytes::from(encode(request)))
            .await
            .map_err(|e| AgentFailure::Broken(format!("sending: {e}")))?;
        loop {
            let frame = match framed.next().await {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Err(AgentFailure::Broken(format!("reading: {e}"))),
                None => {
                    return Err(AgentFailure::Broken(
                        "the agent closed the connection".into(),
                    ));
                }
            };
            match decode::<Reply>(&frame).map_err(|e| AgentFailure::Broken(e.to_string()))? {
                Reply::Chunk { stream, data } => on_chunk(stream, data),
                Reply::Error(e) => return Err(AgentFailure::Refused(e)),
                reply => return Ok(reply),
            }
        }
    };
    tokio::time::timeout(limit, exchange).await.map_err(|_| {
        // An engine link that lets a request run out of time may be wedged by what was
        // written into it: the next connection gets a new one.
        if let AgentEndpoint::Engine(link) = endpoint {
            link.end();
        }
        AgentFailure::Broken(format!("no answer within {} ms", limit.as_millis()))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixListener;

    fn endpoint(dir: &std::path::Path) -> AgentEndpoint {
        AgentEndpoint::Socket {
            socket: dir.join("agent.sock"),
            peer: ExpectedPeer::Pid(i32::try_from(std::process::id()).unwrap()),
        }
    }

    fn socket_of(ep: &AgentEndpoint) -> PathBuf {
        match ep {
            AgentEndpoint::Socket { socket, .. } => socket.clone(),
            AgentEndpoint::Engine(_) => unreachable!(),
        }
    }

    fn with_peer(ep: &AgentEndpoint, peer: ExpectedPeer) -> AgentEndpoint {
        AgentEndpoint::Socket {
            socket: socket_of(ep),
            peer,
        }
    }

    /// A fake agent in this process at `ep`'s socket: answers every connection with
    /// `frames`.
    fn serve(ep: &AgentEndpoint, frames: Vec<Vec<u8>>) {
        let listener = UnixListener::bind(socket_of(ep)).unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut framed = Framed::new(stream, LengthDelimitedCodec::new());
                let _ = framed.next().await;
                for f in &frames {
                    let _ = framed.send(Bytes::from(f.clone())).await;
                }
            }
        });
    }

    /// Asks `ep` for its process list, passing over any chunks.
    async fn ask_list(ep: &AgentEndpoint, limit: Duration) -> Result<Reply, AgentFailure> {
        call(ep, &Request::List, limit, |_, _| {}).await
    }

    #[tokio::test]
    async fn chunks_then_the_final_reply() {
        let dir = tempfile::tempdir().unwrap();
        let ep = endpoint(dir.path());
        serve(
            &ep,
            vec![
                encode(&Reply::Chunk {
                    stream: Stream::Stdout,
                    data: b"a".to_vec(),
                }),
                encode(&Reply::Done),
            ],
        );
        let mut seen = Vec::new();
        let reply = call(&ep, &Request::List, Duration::from_secs(5), |s, d| {
            seen.push((s, d))
        })
        .await
        .unwrap();
        assert_eq!(reply, Reply::Done);
        assert_eq!(seen, vec![(Stream::Stdout, b"a".to_vec())]);
    }

    #[tokio::test]
    async fn a_listener_that_is_not_the_containers_init_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ep = endpoint(dir.path());
        serve(&ep, vec![encode(&Reply::Done)]);
        let me = i32::try_from(std::process::id()).unwrap();
        let ep = with_peer(&ep, ExpectedPeer::Pid(me + 1));
        let err = ask_list(&ep, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, AgentFailure::Impostor(_)), "{err}");

        // Under gVisor the runtime's children hold the socket: this process's parent's
        // children admit it, another parent's do not.
        let parent = parent_of(me).unwrap();
        let ep = with_peer(&ep, ExpectedPeer::ChildOf(parent));
        assert!(ask_list(&ep, Duration::from_secs(5)).await.is_ok());
        let ep = with_peer(&ep, ExpectedPeer::ChildOf(me));
        let err = ask_list(&ep, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, AgentFailure::Impostor(_)), "{err}");
    }

    #[tokio::test]
    async fn an_agent_without_port_hand_overs_relays_the_port() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let dir = tempfile::tempdir().unwrap();
        let ep = endpoint(dir.path());
        let listener = UnixListener::bind(socket_of(&ep)).unwrap();
        // An agent an earlier host started: it cannot decode `ConnectHandOver`; for
        // `Connect` it answers `Connected` and echoes the relayed bytes.
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut framed = Framed::new(stream, LengthDelimitedCodec::new());
                let Some(Ok(frame)) = framed.next().await else {
                    continue;
                };
                if matches!(
                    decode::<Request>(&frame),
                    Ok(Request::ConnectHandOver { .. })
                ) {
                    let refusal = Reply::Error(wharf_sandbox_protocol::AgentError {
                        kind: ErrorKind::Invalid,
                        message: "Found an enum discriminant that was not valid".into(),
                    });
                    let _ = framed.send(Bytes::from(encode(&refusal))).await;
                    continue;
                }
                let _ = framed.send(Bytes::from(encode(&Reply::Connected))).await;
                let mut stream = framed.into_inner();
                let mut buf = [0u8; 5];
                if stream.read_exact(&mut buf).await.is_ok() {
                    let _ = stream.write_all(&buf).await;
                }
            }
        });
        let mut relay = open_relay(&ep, 8080, Duration::from_secs(5)).await.unwrap();
        relay.write_all(b"hello").await.unwrap();
        let mut back = [0u8; 5];
        relay.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
    }

    #[tokio::test]
    async fn garbage_silence_and_absence_are_errors_not_hangs() {
        let dir = tempfile::tempdir().unwrap();
        let ep = endpoint(dir.path());
        let err = ask_list(&ep, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, AgentFailure::Unreachable(_)), "{err}");

        serve(&ep, vec![vec![0xff; 9]]);
        let err = ask_list(&ep, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, AgentFailure::Broken(_)), "{err}");

        let quiet = tempfile::tempdir().unwrap();
        let ep = endpoint(quiet.path());
        let listener = UnixListener::bind(socket_of(&ep)).unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok(conn) = listener.accept().await {
                held.push(conn);
            }
        });
        let err = ask_list(&ep, Duration::from_millis(200)).await.unwrap_err();
        assert!(err.to_string().contains("no answer"), "{err}");
    }
}

//! A connection the agent hands over (`Request::EgressHandOver`: a program's egress
//! connection; `Request::ConnectHandOver`: a connection to a port): the `Connected` frame
//! read with the descriptor that travels with it (`SCM_RIGHTS`), and the descriptor
//! checked before the host uses it. The agent is hostile like everything in a sandbox: at
//! most one descriptor is taken (the kernel closes any others, which do not fit the
//! control buffer), and it must be a TCP socket, or the connection is refused. A
//! `Connected` frame with no descriptor means the agent relays (the descriptor could not
//! travel): the Unix stream then carries the connection's bytes.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketType,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use wharf_sandbox_protocol::Request;

use super::agent_stream::AgentFailure;
use super::relay_frames::{connected, reply_length, request_frame};

/// What a hand-over request gave.
pub(super) enum HandedOver {
    /// The TCP connection itself, and the agent's connection it came on (for a port, the
    /// agent keeps its relay slot until the host closes this one).
    Socket {
        /// The connection in the sandbox.
        tcp: TcpStream,
        /// The request's connection to the agent.
        agent: UnixStream,
    },
    /// The request's connection, which the agent relays.
    Relayed(UnixStream),
}

/// Sends `request` (a hand-over) on `stream` and reads the agent's `Connected` with the
/// descriptor that came with it.
pub(super) async fn await_hand_over(
    mut stream: UnixStream,
    request: &Request,
) -> Result<HandedOver, AgentFailure> {
    stream
        .write_all(&request_frame(request)?)
        .await
        .map_err(|e| AgentFailure::Broken(format!("sending: {e}")))?;
    let mut descriptor = None;
    let mut len = [0u8; 4];
    receive(&stream, &mut len, &mut descriptor).await?;
    let mut payload = vec![0u8; reply_length(len)?];
    receive(&stream, &mut payload, &mut descriptor).await?;
    connected(&payload)?;
    match descriptor {
        Some(fd) => Ok(HandedOver::Socket {
            tcp: sandbox_connection(fd)?,
            agent: stream,
        }),
        None => Ok(HandedOver::Relayed(stream)),
    }
}

/// A port's connection handed over: the TCP connection carries the bytes; the agent's
/// connection is held with it, so the agent's relay slot is given back when this drops.
pub(super) struct HandedOverPort {
    tcp: TcpStream,
    _agent: UnixStream,
}

impl HandedOverPort {
    /// `tcp`, holding `agent` until it drops.
    pub(super) fn new(tcp: TcpStream, agent: UnixStream) -> Self {
        HandedOverPort { tcp, _agent: agent }
    }
}

impl AsyncRead for HandedOverPort {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for HandedOverPort {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Fills `buf` from `stream`, keeping the first descriptor that comes with the bytes (any
/// later one is closed on the spot).
async fn receive(
    stream: &UnixStream,
    buf: &mut [u8],
    descriptor: &mut Option<OwnedFd>,
) -> Result<(), AgentFailure> {
    let mut filled = 0;
    while filled < buf.len() {
        let read = stream
            .async_io(Interest::READABLE, || {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
                let mut control = RecvAncillaryBuffer::new(&mut space);
                let got = rustix::net::recvmsg(
                    stream,
                    &mut [IoSliceMut::new(&mut buf[filled..])],
                    &mut control,
                    RecvFlags::CMSG_CLOEXEC,
                )?;
                for message in control.drain() {
                    if let RecvAncillaryMessage::ScmRights(fds) = message {
                        for fd in fds {
                            descriptor.get_or_insert(fd);
                        }
                    }
                }
                Ok(got.bytes)
            })
            .await
            .map_err(|e: io::Error| AgentFailure::Broken(format!("reading: {e}")))?;
        if read == 0 {
            return Err(AgentFailure::Broken("reading: the agent closed".into()));
        }
        filled += read;
    }
    Ok(())
}

/// The descriptor as a TCP connection in the sandbox, if it is a TCP socket.
fn sandbox_connection(fd: OwnedFd) -> Result<TcpStream, AgentFailure> {
    let not_tcp = |what: String| {
        AgentFailure::Broken(format!(
            "the agent handed over {what}, not a TCP connection"
        ))
    };
    let kind = rustix::net::sockopt::socket_type(&fd)
        .map_err(|e| not_tcp(format!("a descriptor that is no socket ({e})")))?;
    let family = rustix::net::sockopt::socket_domain(&fd)
        .map_err(|e| not_tcp(format!("a socket of no family ({e})")))?;
    if kind != SocketType::STREAM
        || !(family == AddressFamily::INET || family == AddressFamily::INET6)
    {
        return Err(not_tcp(format!(
            "a socket of type {kind:?}, family {family:?}"
        )));
    }
    let tcp = std::net::TcpStream::from(fd);
    tcp.set_nonblocking(true)
        .and_then(|()| TcpStream::from_std(tcp))
        .map_err(|e| AgentFailure::Broken(format!("taking the handed-over connection: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tcp_socket_is_taken() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("a pair");
        let refused = sandbox_connection(OwnedFd::from(a)).expect_err("a Unix socket");
        assert!(
            refused.to_string().contains("not a TCP connection"),
            "{refused}"
        );
        let file = std::fs::File::open("/dev/null").expect("a file");
        assert!(sandbox_connection(OwnedFd::from(file)).is_err());
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        assert!(sandbox_connection(OwnedFd::from(udp)).is_err());
    }
}

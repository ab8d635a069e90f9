//! An egress connection the agent hands over (`Request::EgressHandOver`): the
//! `Connected` frame read with the descriptor that travels with it (`SCM_RIGHTS`), and
//! the descriptor checked before the host uses it. The agent is hostile like everything
//! in a sandbox: at most one descriptor is taken (the kernel closes any others, which do
//! not fit the control buffer), and it must be a TCP socket, or the connection is refused.
//! A `Connected` frame with no descriptor means the agent relays (the descriptor could not
//! travel): the Unix stream then carries the program's bytes.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketType,
};
use tokio::io::{AsyncWriteExt as _, Interest};
use tokio::net::{TcpStream, UnixStream};
use wharf_sandbox_protocol::Request;

use super::agent_stream::AgentFailure;
use super::relay_frames::{connected, reply_length, request_frame};
use crate::egress_proxy::ProgramConnection;

/// Asks the agent on `stream` for the next egress connection, handed over: the program's
/// TCP connection when its descriptor came, else `stream` itself, relayed by the agent.
pub(crate) async fn await_hand_over(
    mut stream: UnixStream,
) -> Result<ProgramConnection, AgentFailure> {
    stream
        .write_all(&request_frame(&Request::EgressHandOver)?)
        .await
        .map_err(|e| AgentFailure::Broken(format!("sending: {e}")))?;
    let mut descriptor = None;
    let mut len = [0u8; 4];
    receive(&stream, &mut len, &mut descriptor).await?;
    let mut payload = vec![0u8; reply_length(len)?];
    receive(&stream, &mut payload, &mut descriptor).await?;
    connected(&payload)?;
    match descriptor {
        Some(fd) => Ok(ProgramConnection::Socket(program_connection(fd)?)),
        None => Ok(ProgramConnection::Relayed(Box::new(stream))),
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

/// The descriptor as the program's TCP connection, if it is a TCP socket.
fn program_connection(fd: OwnedFd) -> Result<TcpStream, AgentFailure> {
    let not_tcp = |what: String| {
        AgentFailure::Broken(format!(
            "the agent handed over {what}, not a program's TCP connection"
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
        let refused = program_connection(OwnedFd::from(a)).expect_err("a Unix socket");
        assert!(
            refused
                .to_string()
                .contains("not a program's TCP connection"),
            "{refused}"
        );
        let file = std::fs::File::open("/dev/null").expect("a file");
        assert!(program_connection(OwnedFd::from(file)).is_err());
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        assert!(program_connection(OwnedFd::from(udp)).is_err());
    }
}

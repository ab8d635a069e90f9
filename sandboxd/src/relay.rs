//! `Connect`: a port relay. The host reaches a TCP port served inside the sandbox through
//! the agent's socket, so preview URLs work even when the container has no network.
//! `ConnectHandOver` connects the same way, then hands the connection to the host
//! ([`hand_over`]), which then reads and writes it itself.
//!
//! After the single `Connected` frame the connection is no longer framed: bytes are copied
//! both ways, and a half-close on one side is passed on to the other. The egress listener
//! (`crate::egress`) relays its connections the same way.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::timeout;
use wharf_sandbox_protocol::{
    AgentError, ErrorKind, MAX_RELAYS, RELAY_CONNECT_TIMEOUT_MS, Reply, encode,
};

use crate::refuse;
use crate::server::{client_gone, error_reply};

/// The copy buffer of a port relay, each way (tokio's own default).
const SMALL_BUFFER: usize = 8 * 1024;
/// The copy buffer of an egress relay, each way: a download then takes a few large reads
/// and writes rather than many 8 KiB ones.
pub const BULK_BUFFER: usize = 256 * 1024;

/// How long the agent tries to reach a port (both addresses together).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(RELAY_CONNECT_TIMEOUT_MS);

/// The relay slots of an agent.
pub struct Relays {
    slots: Semaphore,
}

impl Default for Relays {
    fn default() -> Self {
        Relays {
            slots: Semaphore::new(MAX_RELAYS),
        }
    }
}

/// A TCP connection in the sandbox (to a port, or from a program that reached the egress
/// listener), with the relay slot (port or egress) it holds until the relay ends.
pub struct Opened<'a> {
    tcp: TcpStream,
    _slot: SemaphorePermit<'a>,
    buffer: usize,
}

impl<'a> Opened<'a> {
    /// `tcp`, holding `slot` until its relay ends, copied through 8 KiB buffers.
    pub fn new(tcp: TcpStream, slot: SemaphorePermit<'a>) -> Self {
        // Bytes of an interactive session (a terminal over a WebSocket) must not wait.
        let _ = tcp.set_nodelay(true);
        Opened {
            tcp,
            _slot: slot,
            buffer: SMALL_BUFFER,
        }
    }

    /// The TCP connection (its descriptor is what an egress hand-over sends).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The same, copied through [`BULK_BUFFER`]s: for egress, where downloads dominate
    /// (port relays keep small buffers: measured, a preview's many short connections are
    /// slower with large ones).
    pub fn bulk(mut self) -> Self {
        self.buffer = BULK_BUFFER;
        self
    }

    /// The slot alone, the agent's copy of the connection closed: after a hand-over the
    /// host's end of stream must reach the port, and the slot still bounds the port
    /// connections open at once.
    pub fn into_slot(self) -> SemaphorePermit<'a> {
        self._slot
    }
}

/// Sends the `Connected` frame to `host` with `opened`'s descriptor (`SCM_RIGHTS`, in one
/// `sendmsg`). True when the descriptor went (the caller closes its copy); false when the
/// socket refused it and nothing was sent, so the caller answers and relays as for
/// `Connect` and `EgressWait` (gVisor's host sockets refuse descriptors).
pub async fn hand_over(host: &UnixStream, opened: &Opened<'_>) -> bool {
    let payload = encode(&Reply::Connected);
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    let fds = [opened.tcp().as_fd()];
    let sent = host
        .async_io(Interest::WRITABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return Err(io::Error::other("no room for the descriptor"));
            }
            rustix::net::sendmsg(
                host,
                &[IoSlice::new(&frame)],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(io::Error::from)
        })
        .await;
    let Ok(mut written) = sent else {
        return false;
    };
    // The descriptor went with the first byte; the rest of a five-byte frame into an
    // empty socket buffer is written at once, but a short write is finished here.
    while written < frame.len() {
        let rest = &frame[written..];
        match host
            .async_io(Interest::WRITABLE, || {
                rustix::net::send(host, rest, SendFlags::NOSIGNAL).map_err(io::Error::from)
            })
            .await
        {
            Ok(n) if n > 0 => written += n,
            _ => break,
        }
    }
    true
}

/// Validates `port`, takes a relay slot and connects to the port; the error is the reply.
pub async fn open(relays: &Relays, port: u16) -> Result<Opened<'_>, Reply> {
    if port == 0 {
        return Err(error_reply(
            ErrorKind::Invalid,
            "port 0 cannot be connected to",
        ));
    }
    let Ok(slot) = relays.slots.try_acquire() else {
        return Err(error_reply(
            ErrorKind::Limit,
            format!("at most {MAX_RELAYS} port relays at once"),
        ));
    };
    let tcp = connect(port).await.map_err(Reply::Error)?;
    Ok(Opened::new(tcp, slot))
}

/// Loopback over IPv4, then over IPv6 (a server may listen on either only).
async fn connect(port: u16) -> Result<TcpStream, AgentError> {
    let attempts = async {
        let v4 = match TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await {
            Ok(tcp) => return Ok(tcp),
            Err(error) => error,
        };
        let v6 = match TcpStream::connect((Ipv6Addr::LOCALHOST, port)).await {
            Ok(tcp) => return Ok(tcp),
            Err(error) => error,
        };
        Err(refusal(port, &v4, &v6))
    };
    match timeout(CONNECT_TIMEOUT, attempts).await {
        Ok(result) => result,
        Err(_) => Err(refuse(
            ErrorKind::Failed,
            format!(
                "port {port} did not accept a connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// Why neither loopback address could be reached: nothing listens when one refused and
/// the other refused too or does not exist in this sandbox (no IPv6, say).
fn refusal(port: u16, v4: &io::Error, v6: &io::Error) -> AgentError {
    let refused = |e: &io::Error| e.kind() == io::ErrorKind::ConnectionRefused;
    let absent = |e: &io::Error| {
        refused(e)
            || matches!(
                e.kind(),
                io::ErrorKind::AddrNotAvailable
                    | io::ErrorKind::NetworkUnreachable
                    | io::ErrorKind::NetworkDown
                    | io::ErrorKind::HostUnreachable
            )
            || e.raw_os_error() == Some(rustix::io::Errno::AFNOSUPPORT.raw_os_error())
    };
    if (refused(v4) && absent(v6)) || (refused(v6) && absent(v4)) {
        refuse(
            ErrorKind::NotFound,
            format!("nothing listens on port {port} in this sandbox"),
        )
    } else {
        refuse(
            ErrorKind::Failed,
            format!("cannot connect to port {port}: 127.0.0.1: {v4}; [::1]: {v6}"),
        )
    }
}

/// Relays `host` and the TCP connection both ways until both directions have ended,
/// either side failed, or the host closed its socket; `buffered` (bytes the host sent that
/// were read with its request) goes to the TCP side first.
pub async fn relay(opened: Opened<'_>, mut host: UnixStream, buffered: &[u8]) {
    let Opened {
        mut tcp,
        _slot,
        buffer,
    } = opened;
    if !buffered.is_empty() && tcp.write_all(buffered).await.is_err() {
        return;
    }
    let upstream_done = AtomicBool::new(false);
    let downstream_done = AtomicBool::new(false);
    let (mut host_read, mut host_write) = host.split();
    let (mut tcp_read, mut tcp_write) = tcp.split();
    let upstream = async {
        let mut from_host = tokio::io::BufReader::with_capacity(buffer, &mut host_read);
        tokio::io::copy_buf(&mut from_host, &mut tcp_write).await?;
        tcp_write.shutdown().await?;
        upstream_done.store(true, Ordering::Relaxed);
        if !downstream_done.load(Ordering::Relaxed) {
            // The host only half-closed, or it closed and is gone; a TCP peer that never
            // answers its end of stream must not hold the slot after the host has gone.
            client_gone(&host_read).await;
        }
        io::Result::Ok(())
    };
    let downstream = async {
        let mut from_tcp = tokio::io::BufReader::with_capacity(buffer, &mut tcp_read);
        tokio::io::copy_buf(&mut from_tcp, &mut host_write).await?;
        host_write.shutdown().await?;
        downstream_done.store(true, Ordering::Relaxed);
        io::Result::Ok(())
    };
    tokio::pin!(upstream);
    tokio::select! {
        _ = &mut upstream => {}
        ended = downstream => {
            if ended.is_ok() && !upstream_done.load(Ordering::Relaxed) {
                let _ = upstream.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(errno: rustix::io::Errno) -> io::Error {
        io::Error::from_raw_os_error(errno.raw_os_error())
    }

    #[test]
    fn refusals() {
        use rustix::io::Errno;
        let kind = |v4: Errno, v6: Errno| refusal(8080, &os(v4), &os(v6)).kind;
        let nothing = refusal(8080, &os(Errno::CONNREFUSED), &os(Errno::CONNREFUSED));
        assert_eq!(nothing.kind, ErrorKind::NotFound);
        assert_eq!(
            nothing.message,
            "nothing listens on port 8080 in this sandbox"
        );
        // No IPv6 in the sandbox, however the kernel says so.
        for v6 in [
            Errno::ADDRNOTAVAIL,
            Errno::NETUNREACH,
            Errno::AFNOSUPPORT,
            Errno::NETDOWN,
        ] {
            assert_eq!(kind(Errno::CONNREFUSED, v6), ErrorKind::NotFound, "{v6:?}");
        }
        assert_eq!(
            kind(Errno::NETUNREACH, Errno::CONNREFUSED),
            ErrorKind::NotFound
        );
        // Anything else is a failure, and says what happened on each address.
        for (v4, v6) in [
            (Errno::NETUNREACH, Errno::ADDRNOTAVAIL),
            (Errno::CONNREFUSED, Errno::ACCESS),
            (Errno::NOBUFS, Errno::CONNREFUSED),
        ] {
            assert_eq!(kind(v4, v6), ErrorKind::Failed, "{v4:?} {v6:?}");
        }
        let failed = refusal(1, &os(Errno::ACCESS), &os(Errno::CONNREFUSED));
        assert!(
            failed
                .message
                .starts_with("cannot connect to port 1: 127.0.0.1: ")
        );
        assert!(failed.message.contains("[::1]: "), "{}", failed.message);
    }
}

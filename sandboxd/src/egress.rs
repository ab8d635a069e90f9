//! `EgressWait`: the egress listener. Given `--egress-port`, the agent listens on that
//! port of the sandbox's loopback; programs there reach the host's HTTP proxy through it
//! (`HTTP_PROXY=http://127.0.0.1:PORT`), so a sandbox without a network can still fetch.
//!
//! The host keeps `EgressWait` requests waiting; each takes the next connection a program
//! makes and, after `Connected`, relays it like a port relay (`crate::relay`). Connections
//! made while no request waits stay in the listen backlog until one does.
//!
//! `EgressHandOver` takes the connection the same way, then sends its descriptor to the
//! host with the `Connected` frame ([`crate::relay::hand_over`]): the host then reads and writes the
//! program's connection itself, and the agent is out of the data path (a download is no
//! longer copied through the agent and a second socket). Where the descriptor cannot be
//! sent, the frame goes alone and the agent relays.

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::net::unix::ReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use wharf_sandbox_protocol::{ErrorKind, MAX_EGRESS_RELAYS, Reply};

use crate::relay::Opened;
use crate::server::{error_reply, hung_up};

/// After a failed accept (out of descriptors, say), before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The egress listener and its relay slots (waiting and relaying together).
pub struct Egress {
    listener: TcpListener,
    slots: Semaphore,
}

impl Egress {
    /// Listens on `port` of `127.0.0.1`.
    pub async fn bind(port: u16) -> io::Result<Egress> {
        Ok(Egress {
            listener: TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?,
            slots: Semaphore::new(MAX_EGRESS_RELAYS),
        })
    }
}

/// Takes an egress slot and waits for the next connection to the listener: `None` when
/// the host closed its socket first (the slot is free again), `Some(Err)` with the reply
/// when there is no listener or no free slot.
pub async fn wait<'a>(
    egress: Option<&'a Egress>,
    host: &ReadHalf<'_>,
) -> Option<Result<Opened<'a>, Reply>> {
    let Some(egress) = egress else {
        return Some(Err(error_reply(
            ErrorKind::NotFound,
            "this sandbox has no egress listener",
        )));
    };
    let Ok(slot) = egress.slots.try_acquire() else {
        return Some(Err(error_reply(
            ErrorKind::Limit,
            format!("at most {MAX_EGRESS_RELAYS} egress connections at once"),
        )));
    };
    // Not `client_gone`: it would read and drop bytes the host sends while it waits,
    // which belong to the program that connects.
    tokio::select! {
        tcp = accept(&egress.listener) => Some(Ok(Opened::new(tcp, slot).bulk())),
        () = hung_up(host.as_ref()) => None,
    }
}

/// The next connection; a failed accept is retried (the waiting host keeps waiting).
async fn accept(listener: &TcpListener) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => return tcp,
            Err(error) => {
                eprintln!("wharf-sandboxd: egress accept failed: {error}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

//! The bytes of one proxy connection after its head, both ways, counted against the
//! session's budget. A program's own TCP connection (the agent handed it over) and the
//! destination are spliced (`splice(2)` through a pipe each way): the bytes move between
//! the two sockets inside the kernel and never through this process's memory. A stream
//! the agent relays is copied through buffers.

use std::io;
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::metered::{Counts, Meter, Metered, spent};
use crate::engines::container_types::{PortIo, PortStream};

/// Each pipe's size, one per direction; also the most one splice moves.
const PIPE_BYTES: usize = 256 * 1024;
/// The copy buffer of a relayed tunnel, each way.
const TUNNEL_BUFFER: usize = 256 * 1024;

/// A program's connection to the proxy.
pub enum ProgramConnection {
    /// The program's own TCP connection, handed over by the agent.
    Socket(TcpStream),
    /// A stream the agent relays the program's bytes on.
    Relayed(PortStream),
}

impl ProgramConnection {
    /// The connection as a byte stream, for its request head and the proxy's answers.
    pub(super) fn io(&mut self) -> &mut dyn PortIo {
        match self {
            ProgramConnection::Socket(socket) => socket,
            ProgramConnection::Relayed(stream) => stream.as_mut(),
        }
    }
}

/// Moves bytes both ways between `program` and `upstream` until both have closed (each
/// close passed on as a half close) or either fails or the budget is spent.
pub(super) async fn run(
    program: ProgramConnection,
    upstream: TcpStream,
    meter: &Arc<Meter>,
    counts: &Arc<Counts>,
) -> io::Result<()> {
    match program {
        ProgramConnection::Socket(program) => {
            let out = pump(&program, &upstream, meter, &counts.sent);
            let back = pump(&upstream, &program, meter, &counts.received);
            tokio::try_join!(out, back).map(drop)
        }
        ProgramConnection::Relayed(mut program) => {
            let mut upstream = Metered::new(upstream, meter.clone(), counts.clone());
            tokio::io::copy_bidirectional_with_sizes(
                &mut program,
                &mut upstream,
                TUNNEL_BUFFER,
                TUNNEL_BUFFER,
            )
            .await
            .map(drop)
        }
    }
}

/// Splices `from` into `to` until `from` closes, then half-closes `to`.
async fn pump(
    from: &TcpStream,
    to: &TcpStream,
    meter: &Meter,
    count: &AtomicU64,
) -> io::Result<()> {
    let (pipe_out, pipe_in) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // A smaller pipe (the kernel's 64 KiB, or less where the user's pipe pages are spent)
    // only means more splices.
    let _ = rustix::pipe::fcntl_setpipe_size(&pipe_in, PIPE_BYTES);
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        let moved = from
            .async_io(Interest::READABLE, || {
                Ok(rustix::pipe::splice(
                    from, None, &pipe_in, None, PIPE_BYTES, flags,
                )?)
            })
            .await?;
        if moved == 0 {
            return match socket2::SockRef::from(to).shutdown(Shutdown::Write) {
                Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
                _ => Ok(()),
            };
        }
        if !meter.charge(count, moved) {
            return Err(spent());
        }
        let mut left = moved;
        while left > 0 {
            let written = to
                .async_io(Interest::WRITABLE, || {
                    Ok(rustix::pipe::splice(
                        &pipe_out, None, to, None, left, flags,
                    )?)
                })
                .await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            left -= written;
        }
    }
}

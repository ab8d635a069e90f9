//! `wharf-sandboxd --link`: the agent reached through the engine, where the host cannot
//! reach its socket (an engine on another machine; gVisor without host sockets). The host
//! runs this mode as one long exec per sandbox and speaks yamux over the exec's standard
//! input and output; each stream the host opens becomes one connection to the agent's
//! socket inside the container, so the agent serves it exactly as a direct connection.
//!
//! Each stream starts with the host's opening byte (yamux announces a stream with its first
//! bytes) and then one status byte from here ([`LinkStatus`]): the agent is
//! connected, is not listening yet, or its socket is held by another process than the
//! container's PID 1 (the same check the host makes on a socket it reaches itself). After
//! it, bytes are copied both ways until either side closes.

use std::ffi::OsString;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use futures::future::poll_fn;
use std::time::Duration;

use rustix::process::DumpableBehavior;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, join, stdin, stdout};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio_util::compat::{FuturesAsyncReadCompatExt as _, TokioAsyncReadCompatExt as _};
use wharf_sandbox_protocol::SOCKET_PATH;
use wharf_sandbox_protocol::link::{LINK_OPENING, LinkStatus, link_config, yamux};

/// How long a new stream may take to send its opening byte.
const OPENING_LIMIT: Duration = Duration::from_secs(10);

/// The flag that selects this mode.
pub const LINK_FLAG: &str = "--link";

/// Serves the host's streams on standard input and output until the host leaves.
/// `args` (after the flag): the agent's socket and the pid that must hold it, by default
/// [`SOCKET_PATH`] and 1 (the container's PID 1, in the link's own pid namespace).
pub fn link_main(args: &[OsString]) -> ExitCode {
    let socket = args
        .first()
        .map_or_else(|| PathBuf::from(SOCKET_PATH), PathBuf::from);
    let holder = match args
        .get(1)
        .map(|pid| pid.to_str().and_then(|p| p.parse::<i32>().ok()))
    {
        None => 1,
        Some(Some(pid)) if pid > 0 => pid,
        Some(_) => {
            eprintln!("wharf-sandboxd --link: the holder's pid must be a positive number");
            return ExitCode::from(2);
        }
    };
    if args.len() > 2 {
        eprintln!("wharf-sandboxd --link: usage: --link [SOCKET [PID]]");
        return ExitCode::from(2);
    }
    // The link's output is what the host reads as the agent's: a process in the sandbox
    // must not reach its descriptors through /proc (that needs ptrace access, which a
    // non-dumpable process denies to anyone without CAP_SYS_PTRACE).
    if let Err(error) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable) {
        eprintln!("wharf-sandboxd --link: cannot make the link non-dumpable: {error}");
        return ExitCode::FAILURE;
    }
    // Every thread counts against the container's pids limit (under gVisor's ptrace
    // platform each is a host thread): tokio's standard streams would take blocking-pool
    // threads per read and write, so the pipes are read through epoll instead.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(2)
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("wharf-sandboxd --link: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(&socket, holder))
}

async fn serve(socket: &Path, holder: i32) -> ExitCode {
    let io = match standard_pipes() {
        Ok((input, output)) => Box::new(join(input, output)) as Box<dyn Duplex>,
        // Not pipes (a terminal, a file): tokio's own streams, on its blocking pool.
        Err(_) => Box::new(join(stdin(), stdout())),
    }
    .compat();
    let mut connection = yamux::Connection::new(io, link_config(), yamux::Mode::Server);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            loop {
                match poll_fn(|cx| connection.poll_next_inbound(cx)).await {
                    Some(Ok(stream)) => {
                        let socket = socket.to_path_buf();
                        tokio::task::spawn_local(async move {
                            relay(stream, &socket, holder).await;
                        });
                    }
                    // The host left: its end of the exec's streams is gone.
                    Some(Err(yamux::ConnectionError::Io(_) | yamux::ConnectionError::Closed)) => {
                        return ExitCode::SUCCESS;
                    }
                    // The host broke the protocol: this link is over; the host opens another.
                    Some(Err(error)) => {
                        eprintln!("wharf-sandboxd --link: {error}");
                        return ExitCode::FAILURE;
                    }
                    None => return ExitCode::SUCCESS,
                }
            }
        })
        .await
}

/// Both ways of the link's transport.
trait Duplex: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Duplex for T {}

/// Standard input and output as non-blocking pipes (what an exec's attached streams are).
fn standard_pipes() -> std::io::Result<(pipe::Receiver, pipe::Sender)> {
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((
        pipe::Receiver::from_owned_fd(input)?,
        pipe::Sender::from_owned_fd(output)?,
    ))
}

/// One stream: take the host's opening byte, connect to the agent, say how that went,
/// then copy both ways.
async fn relay(stream: yamux::Stream, socket: &Path, holder: i32) {
    let mut stream = stream.compat();
    let mut opening = [0u8; 1];
    match tokio::time::timeout(OPENING_LIMIT, stream.read_exact(&mut opening)).await {
        Ok(Ok(_)) if opening[0] == LINK_OPENING => {}
        _ => return,
    }
    let (status, agent) = match UnixStream::connect(socket).await {
        Err(_) => (LinkStatus::NotListening, None),
        Ok(agent) => match agent.peer_cred().ok().and_then(|cred| cred.pid()) {
            Some(pid) if pid == holder => (LinkStatus::Connected, Some(agent)),
            // gVisor answers SO_PEERCRED with the caller's own credentials, which tell
            // nothing about the listener: there, as with the agent's host socket, root in
            // the sandbox could take the socket's name and answer for its own sandbox
            // (docs/security.md). Elsewhere no listener can carry this process's pid.
            Some(pid) if pid == std::process::id().cast_signed() => {
                (LinkStatus::Connected, Some(agent))
            }
            _ => (LinkStatus::Impostor, None),
        },
    };
    if stream.write_all(&[status as u8]).await.is_err() {
        return;
    }
    let Some(agent) = agent else {
        let _ = stream.shutdown().await;
        return;
    };
    // The host ends a connection by leaving it (yamux answers a dropped stream with a
    // reset, which reads as an end of stream here, like a half-close): either way the
    // agent's connection is closed whole, which is how the agent learns its client left
    // (a command it runs is killed). Over the link the host never half-closes a request;
    // a relayed TCP half-close becomes a close.
    let (mut from_host, mut to_host) = tokio::io::split(stream);
    let (mut from_agent, mut to_agent) = agent.into_split();
    let upstream = tokio::io::copy(&mut from_host, &mut to_agent);
    let downstream = async {
        let _ = tokio::io::copy(&mut from_agent, &mut to_host).await;
        let _ = to_host.shutdown().await;
        // The agent is done; the connection ends when the host has read it all and left.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = upstream => {}
        () = downstream => {}
    }
}

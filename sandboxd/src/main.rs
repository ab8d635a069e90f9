//! `wharf-sandboxd`: the agent that runs as PID 1 in every Wharf sandbox container.
//!
//! `wharf-sandboxd [--socket PATH] [--user USER [--user-owns DIR]] [--egress-port PORT]
//! [-- CMD ARGS...]`; `wharf-sandboxd --link [SOCKET [PID]]` is the engine link (`link`).
//!
//! It reaps every child and orphan, serves the host's requests on a Unix socket (the
//! protocol of `wharf-sandbox-protocol`), and, given a command after `--`, runs it as the
//! container's main process: signals are forwarded to it and the agent exits with its
//! exit code. Without one it idles until SIGTERM or SIGINT. Given `--egress-port`, it
//! listens on that port of `127.0.0.1` for programs to reach the host's proxy.
//!
//! One thread runs the agent (a current_thread runtime), one blocks reaping children.

mod egress;
mod file_helper;
mod files;
mod link;
mod processes;
mod pty;
mod reaper;
mod relay;
mod ring;
mod run;
mod server;
mod spawn;
mod user;
mod watch;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;

use rustix::process::{DumpableBehavior, Pid, Signal};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;
use wharf_sandbox_protocol::{AgentError, BINARY_PATH, ErrorKind, SOCKET_PATH};

use crate::egress::Egress;
use crate::processes::Processes;
use crate::reaper::Reaper;
use crate::server::Agent;

const USAGE: &str = "usage: wharf-sandboxd [--socket PATH] [--user USER [--user-owns DIR]] \
     [--egress-port PORT] [-- CMD ARGS...]";

/// The command line.
#[derive(Debug, PartialEq)]
struct Args {
    socket: PathBuf,
    /// Who the main command, and every command that names no user, runs as.
    user: Option<String>,
    /// A directory given to that user at start (the sandbox's work dir).
    user_owns: Option<PathBuf>,
    /// The loopback port of the egress listener (`EgressWait`), if any.
    egress_port: Option<u16>,
    /// The main command (after `--`), if any.
    main: Vec<OsString>,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|first| first == pty::HELPER_FLAG) {
        return pty::helper_main(&args[1..]);
    }
    if args
        .first()
        .is_some_and(|first| first == file_helper::HELPER_FLAG)
    {
        return file_helper::helper_main(&args[1..]);
    }
    if args.first().is_some_and(|first| first == link::LINK_FLAG) {
        return link::link_main(&args[1..]);
    }
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("wharf-sandboxd: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // A same-uid process in the sandbox must not ptrace the agent (or read its memory).
    if let Err(error) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable) {
        eprintln!("wharf-sandboxd: cannot make the agent non-dumpable: {error}");
    }
    let me = rustix::process::getpid();
    if me.as_raw_nonzero().get() != 1 {
        // Not init (a test, a debug run): orphans of our children still come to us.
        let _ = rustix::process::set_child_subreaper(Some(me));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("wharf-sandboxd: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(agent_main(args))
}

fn parse_args(args: Vec<OsString>) -> Result<Args, String> {
    let mut socket = PathBuf::from(SOCKET_PATH);
    let mut user = None;
    let mut user_owns = None;
    let mut egress_port = None;
    let mut args = args.into_iter();
    let mut main = Vec::new();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--") => {
                main = args.by_ref().collect();
                if main.is_empty() {
                    return Err("no command after --".into());
                }
            }
            Some("--socket") => {
                socket = args
                    .next()
                    .filter(|path| !path.is_empty())
                    .ok_or("--socket needs a path")?
                    .into();
            }
            Some("--user") => {
                let name = args
                    .next()
                    .and_then(|name| name.into_string().ok())
                    .filter(|name| !name.is_empty())
                    .ok_or("--user needs a user")?;
                user = Some(name);
            }
            Some("--user-owns") => {
                user_owns = Some(
                    args.next()
                        .filter(|dir| !dir.is_empty())
                        .ok_or("--user-owns needs a directory")?
                        .into(),
                );
            }
            Some("--egress-port") => {
                let port = args.next();
                egress_port = Some(egress_port_arg(port.as_ref().and_then(|p| p.to_str()))?);
            }
            Some(other) if other.starts_with("--egress-port=") => {
                egress_port = Some(egress_port_arg(Some(&other["--egress-port=".len()..]))?);
            }
            Some(other) if other.starts_with("--socket=") => {
                socket = other["--socket=".len()..].into();
                if socket.as_os_str().is_empty() {
                    return Err("--socket needs a path".into());
                }
            }
            _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
        }
    }
    if user_owns.is_some() && user.is_none() {
        return Err("--user-owns needs --user".into());
    }
    Ok(Args {
        socket,
        user,
        user_owns,
        egress_port,
        main,
    })
}

/// The value of `--egress-port`: a port from 1 to 65535.
fn egress_port_arg(value: Option<&str>) -> Result<u16, String> {
    value
        .and_then(|port| port.parse::<u16>().ok())
        .filter(|port| *port != 0)
        .ok_or_else(|| "--egress-port needs a port from 1 to 65535".to_owned())
}

async fn agent_main(args: Args) -> ExitCode {
    // Before the socket exists: whoever sees it may signal the agent at once.
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = signals else {
        eprintln!("wharf-sandboxd: cannot handle signals");
        return ExitCode::FAILURE;
    };
    let reaper = match Reaper::start() {
        Ok(reaper) => reaper,
        Err(error) => {
            eprintln!("wharf-sandboxd: cannot start the reaper: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Before the main command runs, so nothing in the sandbox can take the port first; and
    // before the socket exists, so a host that sees the socket has its egress.
    let egress = match args.egress_port {
        None => None,
        Some(port) => match Egress::bind(port).await {
            Ok(egress) => Some(egress),
            Err(error) => {
                eprintln!(
                    "wharf-sandboxd: cannot listen on 127.0.0.1:{port} (--egress-port): {error}"
                );
                return ExitCode::FAILURE;
            }
        },
    };
    let listener = match server::bind(&args.socket) {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "wharf-sandboxd: cannot listen on {}: {error}",
                args.socket.display()
            );
            return ExitCode::FAILURE;
        }
    };
    // A user the image does not have stops the sandbox here, rather than at its first
    // command.
    let identity = match args.user.as_deref().map(user::lookup).transpose() {
        Ok(identity) => identity,
        Err(error) => {
            eprintln!("wharf-sandboxd: --user: {}", error.message);
            let _ = std::fs::remove_file(&args.socket);
            return ExitCode::from(126);
        }
    };
    if let (Some(identity), Some(dir)) = (&identity, &args.user_owns)
        && let Err(error) = std::os::unix::fs::chown(dir, Some(identity.uid), Some(identity.gid))
    {
        eprintln!("wharf-sandboxd: --user-owns {}: {error}", dir.display());
    }
    let agent = Arc::new(Agent {
        reaper,
        processes: Processes::default(),
        default_user: args.user.clone(),
        relays: relay::Relays::default(),
        egress,
        // /proc/self/exe, or where the host mounts the agent when /proc is missing.
        self_exe: std::env::current_exe()
            .ok()
            .or_else(|| Some(PathBuf::from(BINARY_PATH)).filter(|path| path.is_file())),
    });
    let mut main = match args.main.split_first() {
        None => None,
        Some((program, rest)) => {
            let mut command = Command::new(program);
            command.args(rest).stdin(Stdio::null());
            if let Some(identity) = &identity {
                user::apply(&mut command, identity);
            }
            match agent.reaper.spawn(&mut command) {
                Ok(spawned) => Some((spawned.pid, spawned.exit)),
                Err(error) => {
                    eprintln!(
                        "wharf-sandboxd: cannot run {}: {error}",
                        program.to_string_lossy()
                    );
                    let _ = std::fs::remove_file(&args.socket);
                    return ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    });
                }
            }
        }
    };
    tokio::spawn(server::serve(listener, agent.clone()));
    let main_pid = main.as_ref().map(|(pid, _)| *pid);
    // Like tini: the main command gets the signals; without one they stop the agent.
    let code = loop {
        tokio::select! {
            code = main_exit(&mut main) => break code,
            _ = term.recv() => match main_pid {
                Some(pid) => forward(pid, Signal::TERM),
                None => break 0,
            },
            _ = int.recv() => match main_pid {
                Some(pid) => forward(pid, Signal::INT),
                None => break 0,
            },
            _ = hup.recv() => if let Some(pid) = main_pid {
                forward(pid, Signal::HUP);
            },
        }
    };
    let _ = std::fs::remove_file(&args.socket);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The main command's exit code; never resolves without a main command.
async fn main_exit(main: &mut Option<(u32, oneshot::Receiver<i32>)>) -> i32 {
    match main {
        Some((_, exit)) => exit.await.unwrap_or(1),
        None => std::future::pending().await,
    }
}

fn forward(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// A refusal with its kind and message.
pub fn refuse(kind: ErrorKind, message: impl Into<String>) -> AgentError {
    AgentError {
        kind,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse(&[]).unwrap(),
            Args {
                socket: SOCKET_PATH.into(),
                user: None,
                user_owns: None,
                egress_port: None,
                main: vec![]
            }
        );
        let args = parse(&["--socket", "/tmp/a.sock", "--", "sleep", "--socket"]).unwrap();
        assert_eq!(args.socket, PathBuf::from("/tmp/a.sock"));
        assert_eq!(args.main, ["sleep", "--socket"]);
        assert_eq!(parse(&["--socket=/x"]).unwrap().socket, PathBuf::from("/x"));
        assert_eq!(
            parse(&["--user", "1000:1000", "--", "sh"])
                .unwrap()
                .user
                .as_deref(),
            Some("1000:1000")
        );
        assert_eq!(
            parse(&["--egress-port", "3128"]).unwrap().egress_port,
            Some(3128)
        );
        assert_eq!(parse(&["--egress-port=1"]).unwrap().egress_port, Some(1));
        assert_eq!(
            parse(&["--egress-port", "65535", "--", "sh"])
                .unwrap()
                .egress_port,
            Some(65535)
        );
        for bad in [
            &["--egress-port"][..],
            &["--egress-port", "0"],
            &["--egress-port", "x"],
            &["--egress-port", "65536"],
            &["--egress-port", "-1"],
            &["--egress-port", ""],
            &["--egress-port="],
            &["--egress-port=0"],
            &["--socket"],
            &["--"],
            &["--socket="],
            &["--user"],
            &["--user", ""],
            &["--user-owns", "/work"],
            &["sleep"],
            &["-v"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}

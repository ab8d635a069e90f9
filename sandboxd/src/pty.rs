//! Terminals for background processes, without `unsafe`.
//!
//! A process on a terminal must lead a new session with the terminal as its controlling
//! terminal: `setsid` and `TIOCSCTTY` between fork and exec, which `std::process` only
//! offers through the unsafe `pre_exec`. Instead the agent spawns its own binary in
//! helper mode ([`HELPER_FLAG`]) on the terminal; the helper does both calls and then
//! `exec`s the real command in place (same pid).

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use rustix::fs::{Gid, OFlags, Uid};
use rustix::io::Errno;
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::net::unix::pipe;
use wharf_sandbox_protocol::TerminalSize;

/// The first argument that puts the agent's binary in helper mode:
/// `wharf-sandboxd --terminal-helper -- PROGRAM ARGS...`.
pub const HELPER_FLAG: &str = "--terminal-helper";
/// The largest rows or columns of a terminal.
const MAX_DIMENSION: u16 = 1000;

/// The agent's side of a terminal.
///
/// Registered with tokio as the two ends of a pipe (`from_owned_fd_unchecked`, two
/// descriptors of the one non-blocking master): reads and writes on a terminal master
/// behave as on a pipe, and tokio's safe `AsyncFd::new` is deprecated, its replacement
/// `unsafe`.
pub struct Master {
    output: pipe::Receiver,
    input: pipe::Sender,
}

/// A terminal size within bounds (1–1000 each way).
pub fn valid_size(size: TerminalSize) -> bool {
    (1..=MAX_DIMENSION).contains(&size.cols) && (1..=MAX_DIMENSION).contains(&size.rows)
}

/// Opens a terminal of `size`: its master (for the agent) and its slave (for the child),
/// the slave owned by `owner` when given.
pub fn open(size: TerminalSize, owner: Option<(u32, u32)>) -> io::Result<(Master, OwnedFd)> {
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let slave = match rustix::pty::ioctl_tiocgptpeer(&master, flags) {
        Ok(slave) => slave,
        // Kernels before 4.13 (and some sandboxed kernels): open it by name.
        Err(_) => {
            let name = rustix::pty::ptsname(&master, Vec::new())?;
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags((OFlags::NOCTTY | OFlags::CLOEXEC).bits() as i32)
                .open(OsStr::from_bytes(name.as_bytes()))?
                .into()
        }
    };
    if let Some((uid, gid)) = owner {
        // Best effort: the child has the descriptors anyway; this lets it reopen /dev/pts/N.
        let _ = rustix::fs::fchown(&slave, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
    }
    rustix::termios::tcsetwinsize(&master, winsize(size))?;
    rustix::io::ioctl_fionbio(&master, true)?;
    let input = pipe::Sender::from_owned_fd_unchecked(master.try_clone()?)?;
    let output = pipe::Receiver::from_owned_fd_unchecked(master)?;
    Ok((Master { output, input }, slave))
}

fn winsize(size: TerminalSize) -> Winsize {
    Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

impl Master {
    /// Reads the terminal's output; `Ok(0)` once no process holds the terminal any more.
    pub async fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            self.output.readable().await?;
            match self.output.try_read(buffer) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                // Linux reports the last slave's close as EIO.
                Err(error) if error.raw_os_error() == Some(Errno::IO.raw_os_error()) => {
                    return Ok(0);
                }
                result => return result,
            }
        }
    }

    /// Writes all of `data` to the terminal (the process's input).
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            self.input.writable().await?;
            match self.input.try_write(data) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => data = &data[n..],
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Sets the terminal's size (the foreground process gets SIGWINCH).
    pub fn resize(&self, size: TerminalSize) -> io::Result<()> {
        Ok(rustix::termios::tcsetwinsize(&self.output, winsize(size))?)
    }
}

/// Helper mode: make stdin (the terminal) the controlling terminal of a new session, then
/// become `PROGRAM ARGS...`. Only returns when that fails.
pub fn helper_main(args: &[OsString]) -> ExitCode {
    let Some((program, args)) = args
        .split_first()
        .filter(|(separator, _)| *separator == "--")
        .and_then(|(_, rest)| rest.split_first())
    else {
        eprintln!("usage: wharf-sandboxd {HELPER_FLAG} -- PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    if let Err(error) = rustix::process::setsid() {
        eprintln!("wharf-sandboxd: setsid: {error}");
        return ExitCode::from(126);
    }
    if let Err(error) = rustix::process::ioctl_tiocsctty(io::stdin().as_fd()) {
        eprintln!("wharf-sandboxd: cannot take the terminal: {error}");
        return ExitCode::from(126);
    }
    let error = Command::new(program).args(args).exec();
    eprintln!(
        "wharf-sandboxd: cannot run {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(if error.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

//! Reaps every child and orphan (the agent is PID 1) and hands the exit codes of the
//! children the agent spawned to whoever waits for them.
//!
//! One std thread blocks in `waitid`; nothing else in the agent ever waits for a child
//! (no `tokio::process`, no `Child::wait`), so there is no race over who reaps what, with
//! one exception: `std::process::Command::spawn` itself reaps a child whose `exec` failed,
//! and panics when that child was reaped first. So every spawn goes through
//! [`Reaper::spawn`], which holds a lock the reaper thread takes before it reaps; the
//! thread only peeks at exits (`WNOWAIT`) without it.
//!
//! A pid may be reused once reaped. Each reap is numbered, and a spawn records how many
//! reaps came before it: an exit numbered no higher belongs to an earlier process with the
//! same pid, and is not delivered.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{WaitId, WaitIdOptions, WaitOptions, WaitStatus};
use tokio::sync::{mpsc, oneshot};

/// How long the reaper sleeps when the agent has no child at all (an orphan reparented
/// from a `docker exec` is noticed within this time; a spawn wakes it at once).
const IDLE_POLL: Duration = Duration::from_millis(100);
/// The reaper thread needs little stack.
const REAPER_STACK_BYTES: usize = 64 * 1024;

/// A child the agent spawned, and its exit code to come (128 + n when killed by signal n).
pub struct Spawned {
    /// The child (its pipes); never waited on.
    pub child: Child,
    /// Its pid.
    pub pid: u32,
    /// Resolves when it has exited and been reaped.
    pub exit: oneshot::Receiver<i32>,
}

/// The handle to the reaper thread and the table of awaited children.
pub struct Reaper {
    shared: Arc<Shared>,
    waiters: Arc<Mutex<HashMap<u32, Waiter>>>,
    thread: Thread,
}

/// What the reaper thread and the spawning side share.
struct Shared {
    /// Held around every spawn, and by the reaper thread while it reaps.
    spawn_lock: Mutex<()>,
    /// Reaps so far.
    reaped: AtomicU64,
    /// The agent's own working directory, to come back to after a spawn made in another.
    home: Option<OwnedFd>,
}

/// A spawned child's waiter.
struct Waiter {
    /// Reaps before the spawn.
    after: u64,
    exit: oneshot::Sender<i32>,
}

/// One reaped child.
struct Reaped {
    seq: u64,
    pid: u32,
    code: i32,
}

impl Reaper {
    /// Starts the reaper thread and the task that delivers exits; call inside the runtime.
    pub fn start() -> io::Result<Self> {
        let home = rustix::fs::open(
            ".",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .ok();
        let shared = Arc::new(Shared {
            spawn_lock: Mutex::new(()),
            reaped: AtomicU64::new(0),
            home,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = thread::Builder::new()
            .name("reaper".into())
            .stack_size(REAPER_STACK_BYTES)
            .spawn({
                let shared = shared.clone();
                move || reap_forever(&shared, &tx)
            })?;
        let waiters = Arc::new(Mutex::new(HashMap::new()));
        tokio::spawn(deliver(rx, waiters.clone()));
        Ok(Self {
            shared,
            waiters,
            thread: handle.thread().clone(),
        })
    }

    /// Spawns `command` and registers the child before its exit can be delivered.
    pub fn spawn(&self, command: &mut Command) -> io::Result<Spawned> {
        self.spawn_in(command, None)
    }

    /// The same, the child starting in working directory `dir`. std spawns a command with
    /// its own working directory by `fork` when statically linked (it cannot find glibc's
    /// `posix_spawn_file_actions_addchdir_np`), and a fork copies the agent's page tables
    /// and faults its pages back in; so, for a command that changes no ids, the agent
    /// moves into `dir` itself, spawns with `posix_spawn` (the child shares the agent's
    /// memory until it execs), and moves back. Safe here: every spawn holds the spawn
    /// lock, and nothing else in the agent uses a relative path.
    pub fn spawn_in(&self, command: &mut Command, dir: Option<&Path>) -> io::Result<Spawned> {
        let guard = lock(&self.shared.spawn_lock);
        let child = match (dir, &self.shared.home) {
            (None, _) => command.spawn()?,
            (Some(dir), Some(home)) if command.get_current_dir().is_none() => {
                std::env::set_current_dir(dir)?;
                let child = command.spawn();
                // Back even when the spawn failed; an O_PATH descriptor of a directory
                // that still exists (it is held open) does not fail fchdir.
                let _ = rustix::process::fchdir(home);
                child?
            }
            (Some(dir), _) => command.current_dir(dir).spawn()?,
        };
        let after = self.shared.reaped.load(Ordering::SeqCst);
        let pid = child.id();
        let (tx, exit) = oneshot::channel();
        lock(&self.waiters).insert(pid, Waiter { after, exit: tx });
        drop(guard);
        // The reaper may be asleep for want of children.
        self.thread.unpark();
        Ok(Spawned { child, pid, exit })
    }
}

/// Delivers exits to their waiters; exits of orphans (and of reused pids) are dropped.
async fn deliver(
    mut rx: mpsc::UnboundedReceiver<Reaped>,
    waiters: Arc<Mutex<HashMap<u32, Waiter>>>,
) {
    while let Some(reaped) = rx.recv().await {
        let mut waiters = lock(&waiters);
        if waiters
            .get(&reaped.pid)
            .is_some_and(|waiter| reaped.seq > waiter.after)
            && let Some(waiter) = waiters.remove(&reaped.pid)
        {
            // The receiver may be gone (a Run whose client left): nothing to do then.
            let _ = waiter.exit.send(reaped.code);
        }
    }
}

/// The reaper thread's loop; it never returns.
fn reap_forever(shared: &Shared, tx: &mpsc::UnboundedSender<Reaped>) {
    loop {
        // Peek: block until some child has exited, without reaping it.
        match rustix::process::waitid(WaitId::All, WaitIdOptions::EXITED | WaitIdOptions::NOWAIT) {
            Ok(_) => {}
            Err(Errno::CHILD) => {
                thread::park_timeout(IDLE_POLL);
                continue;
            }
            Err(Errno::INTR) => continue,
            Err(_) => {
                thread::sleep(IDLE_POLL);
                continue;
            }
        }
        let _guard = lock(&shared.spawn_lock);
        while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
            let seq = shared.reaped.fetch_add(1, Ordering::SeqCst) + 1;
            let pid = u32::try_from(pid.as_raw_nonzero().get()).unwrap_or(0);
            // The runtime may be gone while the agent exits; reaping goes on regardless.
            let _ = tx.send(Reaped {
                seq,
                pid,
                code: exit_code(status),
            });
        }
    }
}

/// The exit code of a wait status: the code, or 128 + n when killed by signal n.
pub fn exit_code(status: WaitStatus) -> i32 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 128,
    }
}

/// Locks a mutex; a poisoned one is still usable (nothing here leaves state half-made,
/// and the release build aborts on panic anyway).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

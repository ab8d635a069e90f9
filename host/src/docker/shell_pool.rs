//! The idle resident shells of every container (`resident_shell` runs commands in them):
//! at most a few per container, each reused only by the backend that started it and only
//! while it is quiet. The Docker client holds one pool; this file knows nothing of the
//! client, so the client and the shells do not import each other.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};

use super::leftovers::LeftoverMarks;
use super::types::{InputSink, OutputStream};

/// Idle shells kept per container.
const MAX_IDLE_PER_CONTAINER: usize = 2;
/// An idle shell older than this is closed instead of reused (it holds a connection to
/// the engine and a process in the container).
const MAX_IDLE: Duration = Duration::from_secs(300);
/// One running `/bin/sh` exec with its streams.
pub(crate) struct ResidentShell {
    /// The backend whose ownership check let the shell start.
    pub(super) backend: String,
    /// The shell's stdin.
    pub(super) input: InputSink,
    /// The shell's multiplexed output.
    pub(super) output: OutputStream,
    /// When it was last checked in.
    pub(super) idle_since: Instant,
}

impl ResidentShell {
    /// Whether the shell is still there and quiet: its stream has neither ended nor
    /// produced output since its last command.
    fn is_quiet(&mut self) -> bool {
        self.idle_since.elapsed() < MAX_IDLE && self.output.next().now_or_never().is_none()
    }
}

/// The idle resident shells of every container, by container id.
#[derive(Default)]
pub(crate) struct ShellPool {
    idle: Mutex<HashMap<String, Vec<ResidentShell>>>,
    marks: LeftoverMarks,
}

impl ShellPool {
    /// An idle shell of `container` that `backend` started: it passed that backend's
    /// ownership check then, and being alive it shows the container still runs.
    pub(super) fn checkout(&self, container: &str, backend: &str) -> Option<ResidentShell> {
        let mut idle = self.idle.lock().ok()?;
        let shells = idle.get_mut(container)?;
        if shells.first().is_some_and(|s| s.backend != backend) {
            return None;
        }
        let found = std::iter::from_fn(|| shells.pop()).find_map(|mut shell| {
            // A shell that ended or printed while idle is dropped here.
            shell.is_quiet().then_some(shell)
        });
        if shells.is_empty() {
            idle.remove(container);
        }
        found
    }

    pub(super) fn check_in(&self, container: &str, mut shell: ResidentShell) {
        if let Ok(mut idle) = self.idle.lock() {
            let shells = idle.entry(container.to_string()).or_default();
            if shells.len() < MAX_IDLE_PER_CONTAINER {
                shell.idle_since = Instant::now();
                shells.push(shell);
            }
        }
    }

    /// What is known about the leftovers in each container.
    pub(crate) fn marks(&self) -> &LeftoverMarks {
        &self.marks
    }

    /// Closes the container's idle shells (it is being stopped or removed).
    pub(crate) fn forget(&self, container: &str) {
        self.marks.forget(container);
        let closed = self
            .idle
            .lock()
            .ok()
            .and_then(|mut idle| idle.remove(container));
        drop(closed);
    }
}

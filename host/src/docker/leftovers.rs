//! Processes a finished command left running, and keeping them away from later commands'
//! input.
//!
//! A command's process group is not the whole story: a child can `setsid` into a group of
//! its own and keep running after the command exited. Such a leftover shares the container
//! with every later command, and any process of the container running as the same user can
//! open another's pipes through `/proc/<pid>/fd`. A resident shell's stdin is such a pipe,
//! and it carries command after command: a leftover reading it would take the next
//! command's line (so the command never runs), learn its frame nonce and answer in its
//! place. Wharf cannot stop a live process from opening pipes in its own container, so it
//! makes sure no command line is written into a resident shell while a leftover exists:
//!
//! - **Anywhere in the container.** Wharf creates every container with an init as PID 1,
//!   and a process whose parent exits is adopted by that init, whatever its group or
//!   session. Apart from the container's main process, a live child of PID 1 is therefore
//!   a leftover of some finished command ([`ADOPTED_COUNT`]; `docker exec` processes have
//!   no parent inside the container, so commands still running are not counted).
//! - **After every resident command**, the shell counts them before it prints its end
//!   frames; a shell whose command left anything (adopted, or still in its group) is
//!   retired and the container is marked unverified.
//! - **One-off execs** (commands with stdin, another user, or unusual variable names) may
//!   leave processes too: one starting marks the container unverified, and while one runs
//!   no command goes to a resident shell.
//! - **Before a resident shell gets a line in an unverified container**, a separate exec
//!   ([`CHECK`]) counts adopted processes and answers with its *exit code*, which the
//!   engine reports and nothing in the container can forge. Clean: the mark is cleared
//!   and the shell gets the line. Not clean: the command runs as a one-off exec, whose
//!   command travels as the exec's arguments through the engine API and whose stdin
//!   carries only its own input: there is no shared stream for the leftover to take
//!   later commands from.
//!
//! What this does not promise: a leftover that stays alive keeps living in the sandbox
//! beside later commands, so it can observe them as any process in that container can
//! (`/proc`), and commands running at the same time share the container too.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecOptions};

/// The loop behind [`ADOPTED_COUNT`] and [`CHECK`], written once.
macro_rules! adopted_count {
    () => {
        concat!(
            r#"wharf_n=0; for wharf_d in /proc/[0-9]*; do "#,
            r#"{ read -r wharf_s; } 2>/dev/null < "$wharf_d/stat" || continue; "#,
            r#"wharf_s=${wharf_s##*) }; set -- $wharf_s; "#,
            r#"[ "$2" = 1 ] && [ "$1" != Z ] && wharf_n=$((wharf_n+1)); done; "#,
        )
    };
}

/// Counts the live children of PID 1 into `wharf_n` (no fork: the shell reads `/proc`
/// itself). Clobbers the positional parameters.
pub(crate) const ADOPTED_COUNT: &str = adopted_count!();

/// Exits 0 when PID 1 has no child but the main process, 3 otherwise.
pub(crate) const CHECK: &str = concat!(adopted_count!(), r#"[ "$wharf_n" -le 1 ] || exit 3"#);

/// How long the check may take before the container counts as not clean.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between polls of the check's state.
const CHECK_POLL: Duration = Duration::from_millis(10);

/// What is known about one container's leftovers.
#[derive(Debug, Default)]
struct Mark {
    /// Something may have been left since the last clean check.
    unverified: bool,
    /// Bumped whenever `unverified` is set, so a check that raced one is not trusted.
    epoch: u64,
    /// One-off execs running now.
    one_offs: usize,
}

/// Where a command may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// A resident shell: nothing is left in the container.
    Shell,
    /// A check must run first; the epoch it starts from.
    Check(u64),
    /// A one-off exec: a one-off is running.
    OneOff,
}

/// The marks of every container this client runs commands in.
#[derive(Debug, Default)]
pub(crate) struct LeftoverMarks {
    marks: Mutex<HashMap<String, Mark>>,
}

impl LeftoverMarks {
    fn with<T>(&self, container: &str, f: impl FnOnce(&mut Mark) -> T) -> T {
        let mut marks = self
            .marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(marks.entry(container.to_string()).or_default())
    }

    /// Where a command that fits a resident shell goes now.
    pub(crate) fn route(&self, container: &str) -> Route {
        self.with(container, |m| {
            if m.one_offs > 0 {
                Route::OneOff
            } else if m.unverified {
                Route::Check(m.epoch)
            } else {
                Route::Shell
            }
        })
    }

    /// Something may have been left in the container.
    pub(crate) fn dirty(&self, container: &str) {
        self.with(container, |m| {
            m.unverified = true;
            m.epoch += 1;
        });
    }

    /// A check that started at `epoch` found the container clean.
    pub(crate) fn checked_clean(&self, container: &str, epoch: u64) {
        self.with(container, |m| {
            if m.epoch == epoch && m.one_offs == 0 {
                m.unverified = false;
            }
        });
    }

    /// A one-off exec starts; the returned guard marks its end when dropped.
    pub(crate) fn one_off(&self, container: &str) -> OneOffRunning<'_> {
        self.with(container, |m| {
            m.one_offs += 1;
            m.unverified = true;
            m.epoch += 1;
        });
        OneOffRunning {
            marks: self,
            container: container.to_string(),
        }
    }

    /// The container is stopped or removed: its processes are gone.
    pub(crate) fn forget(&self, container: &str) {
        let mut marks = self
            .marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        marks.remove(container);
    }
}

/// A one-off exec in progress (see [`LeftoverMarks::one_off`]).
pub(crate) struct OneOffRunning<'a> {
    marks: &'a LeftoverMarks,
    container: String,
}

impl Drop for OneOffRunning<'_> {
    fn drop(&mut self) {
        self.marks.with(&self.container, |m| {
            m.one_offs = m.one_offs.saturating_sub(1);
            // Its leftovers may have appeared up to its very end.
            m.unverified = true;
            m.epoch += 1;
        });
    }
}

/// A resident command in progress: unless it ends clean, the container is marked
/// unverified (also when the command's future is dropped half-way).
pub(crate) struct ResidentRunning<'a> {
    marks: &'a LeftoverMarks,
    container: String,
    clean: bool,
}

impl<'a> ResidentRunning<'a> {
    pub(crate) fn new(marks: &'a LeftoverMarks, container: &str) -> Self {
        ResidentRunning {
            marks,
            container: container.to_string(),
            clean: false,
        }
    }

    /// The shell reported the command ended and left nothing behind.
    pub(crate) fn ended_clean(mut self) {
        self.clean = true;
    }
}

impl Drop for ResidentRunning<'_> {
    fn drop(&mut self) {
        if !self.clean {
            self.marks.dirty(&self.container);
        }
    }
}

/// Runs [`CHECK`] in the container as a separate exec; true when the container is clean.
/// Any failure (the check killed, timed out, the engine erring) counts as not clean.
pub(crate) async fn check_clean(api: &bollard::Docker, container: &str) -> bool {
    let run = async {
        let options = CreateExecOptions {
            cmd: Some(vec!["/bin/sh", "-c", CHECK]),
            user: Some("0"),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            ..Default::default()
        };
        let created = api.create_exec(container, options).await?;
        let start = StartExecOptions {
            detach: true,
            ..Default::default()
        };
        api.start_exec(&created.id, Some(start)).await?;
        let begun = Instant::now();
        while begun.elapsed() < CHECK_TIMEOUT {
            let state = api.inspect_exec(&created.id).await?;
            if state.running != Some(true) && state.exit_code.is_some() {
                return Ok(state.exit_code == Some(0));
            }
            tokio::time::sleep(CHECK_POLL).await;
        }
        Ok::<bool, bollard::errors::Error>(false)
    };
    match tokio::time::timeout(CHECK_TIMEOUT, run).await {
        Ok(Ok(clean)) => clean,
        Ok(Err(e)) => {
            tracing::debug!(container, error = %e, "the leftover check failed");
            false
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_offs_and_leftovers_route_through_a_check() {
        let marks = LeftoverMarks::default();
        assert_eq!(marks.route("c"), Route::Shell);
        let running = marks.one_off("c");
        assert_eq!(marks.route("c"), Route::OneOff);
        drop(running);
        let Route::Check(epoch) = marks.route("c") else {
            panic!("a finished one-off leaves the container unverified");
        };
        marks.dirty("c");
        marks.checked_clean("c", epoch);
        assert!(
            matches!(marks.route("c"), Route::Check(_)),
            "a check that raced a new leftover is not trusted"
        );
        let Route::Check(epoch) = marks.route("c") else {
            panic!("still unverified");
        };
        marks.checked_clean("c", epoch);
        assert_eq!(marks.route("c"), Route::Shell);
        assert_eq!(marks.route("other"), Route::Shell);
        marks.dirty("c");
        marks.forget("c");
        assert_eq!(marks.route("c"), Route::Shell);
    }
}

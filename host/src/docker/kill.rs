//! Killing an exec's processes. Docker has no exec-kill API and closing the stream does not
//! kill anything, so a second exec sends SIGKILL to the command's process group (the
//! wrapper reported its pgid) and to every process carrying the exec's marker variable
//! (for the window before the pid is known, or children that left the group).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecOptions};

/// The environment variable that marks every process of one exec.
pub(crate) const MARKER_VAR: &str = "WHARF_EXEC_ID";

/// `$1`: pgid (0 if unknown), `$2`: marker value.
const KILL_SCRIPT: &str = r#"pg="$1"; id="$2"
if [ "$pg" -gt 1 ] 2>/dev/null; then kill -KILL -"$pg" 2>/dev/null; fi
for d in /proc/[0-9]*; do
  if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "WHARF_EXEC_ID=$id"; then
    kill -KILL "${d#/proc/}" 2>/dev/null
  fi
done
true"#;

/// How long a kill may take before it is given up on.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before the second sweep when the pid was not known.
const SECOND_SWEEP_AFTER: Duration = Duration::from_millis(200);

/// What is needed to kill one exec's processes.
#[derive(Clone)]
pub(crate) struct KillTarget {
    pub(crate) api: bollard::Docker,
    pub(crate) container: String,
    pub(crate) marker: String,
    /// The process group id once the wrapper reported it; 0 before.
    pub(crate) pgid: Arc<AtomicI64>,
}

impl KillTarget {
    /// Kills the processes and waits (bounded) for the kill exec to finish. Before the
    /// wrapper reported its pid the command may still be starting (a process forked after
    /// the sweep read `/proc` escapes it), so that case sweeps a second time.
    pub(crate) async fn kill(&self) -> Result<(), bollard::errors::Error> {
        let pid_known = self.pgid.load(Ordering::SeqCst) > 1;
        self.kill_once().await?;
        if !pid_known {
            tokio::time::sleep(SECOND_SWEEP_AFTER).await;
            self.kill_once().await?;
        }
        Ok(())
    }

    async fn kill_once(&self) -> Result<(), bollard::errors::Error> {
        let fut = async {
            let pgid = self.pgid.load(Ordering::SeqCst).to_string();
            let options = CreateExecOptions {
                cmd: Some(vec![
                    "/bin/sh",
                    "-c",
                    KILL_SCRIPT,
                    "wharf-kill",
                    pgid.as_str(),
                    self.marker.as_str(),
                ]),
                user: Some("0"),
                attach_stdout: Some(false),
                attach_stderr: Some(false),
                ..Default::default()
            };
            let created = self.api.create_exec(&self.container, options).await?;
            let start = StartExecOptions {
                detach: true,
                ..Default::default()
            };
            self.api.start_exec(&created.id, Some(start)).await?;
            let begun = Instant::now();
            while begun.elapsed() < KILL_TIMEOUT {
                let state = self.api.inspect_exec(&created.id).await?;
                if state.running != Some(true) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(())
        };
        tokio::time::timeout(KILL_TIMEOUT, fut)
            .await
            .unwrap_or(Err(bollard::errors::Error::RequestTimeoutError))
    }
}

/// Kills the exec's processes if dropped while armed: a dropped exec future (timeout
/// around it, client gone, cancelled call) must not leave its command running.
pub(crate) struct KillGuard {
    target: Option<KillTarget>,
}

impl KillGuard {
    pub(crate) fn arm(target: KillTarget) -> Self {
        KillGuard {
            target: Some(target),
        }
    }

    /// Kills the command now (it timed out) while `drain` reads what is left of its
    /// output; the guard is disarmed once the kill went through.
    pub(crate) async fn kill_while(&mut self, drain: impl std::future::Future<Output = ()>) {
        let Some(target) = self.target.clone() else {
            drain.await;
            return;
        };
        let (killed, ()) = tokio::join!(target.kill(), drain);
        match killed {
            Ok(()) => self.disarm(),
            Err(e) => {
                tracing::warn!(container = %target.container, error = %e, "could not kill a timed-out command");
            }
        }
    }

    /// The command finished or was killed: nothing to do on drop.
    pub(crate) fn disarm(&mut self) {
        self.target = None;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        let Some(target) = self.target.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(e) = target.kill().await {
                        tracing::warn!(container = %target.container, error = %e, "could not kill an abandoned exec");
                    }
                });
            }
            Err(_) => {
                tracing::warn!(container = %target.container, "exec dropped outside a runtime: its processes were not killed");
            }
        }
    }
}

//! Resident shells: one long-lived `/bin/sh` exec per container (more when commands run
//! side by side) that runs commands sent to its stdin. A Docker exec costs a create, a
//! start and inspect polls, tens of milliseconds each time; through a shell
//! already running, a command costs a fork in the container and a round trip on an open
//! stream.
//!
//! Each command gets a fresh nonce; the shell starts it under `setsid` (its own session
//! and process group, as a one-off exec does), reports its pid as a frame on stderr,
//! waits for it, and ends both streams with frames carrying the exit code and whether
//! it left anything behind. A shell whose command left processes behind, timed out, was
//! cancelled or printed after its end frame is not reused.
//!
//! A leftover must not read the next command's line from the shell's stdin, nor answer
//! in its place: how that is ensured (a count of adopted processes after every command,
//! a check the engine reports before a line goes to a shell in a container that may hold
//! one, and one-off execs otherwise) is described in [`leftovers`](super::leftovers).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::CreateExecOptions;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::frames::FrameScanner;
use super::kill::{KillGuard, KillTarget};
use super::leftovers::{ResidentRunning, Route, check_clean};
use super::output::{Tail, exec_output};
use super::shell_line::command_line;
use super::shell_pool::ResidentShell;
use super::types::Owner;

/// Output still read after a kill, at most.
const KILLED_DRAIN: Duration = Duration::from_secs(2);
use super::types::{ExecOutput, ExecRequest};

/// Writes one command line to the shell.
async fn send(shell: &mut ResidentShell, line: &str) -> std::io::Result<()> {
    shell.input.write_all(line.as_bytes()).await?;
    shell.input.flush().await
}

/// How the shell's frames ended one command.
#[derive(Default)]
struct Ending {
    exit: Option<i32>,
    left_processes: bool,
    stdout_done: bool,
    stderr_done: bool,
    /// Output after an end frame, or a frame not understood.
    stray: bool,
}

impl Ending {
    fn done(&self) -> bool {
        self.stdout_done && self.stderr_done
    }
}

/// One command's output as it is read.
struct Reading {
    stdout_frames: FrameScanner,
    stderr_frames: FrameScanner,
    stdout: Tail,
    stderr: Tail,
    ending: Ending,
}

impl Reading {
    fn take(&mut self, item: LogOutput, pgid: &AtomicI64) {
        let (message, is_stdout) = match item {
            LogOutput::StdOut { message } | LogOutput::Console { message } => (message, true),
            LogOutput::StdErr { message } => (message, false),
            LogOutput::StdIn { .. } => return,
        };
        let (frames, tail, done) = if is_stdout {
            (
                &mut self.stdout_frames,
                &mut self.stdout,
                self.ending.stdout_done,
            )
        } else {
            (
                &mut self.stderr_frames,
                &mut self.stderr,
                self.ending.stderr_done,
            )
        };
        if done {
            self.ending.stray = true;
            return;
        }
        frames.feed(&message);
        while let Some(fields) = frames.next_frame(&mut |b: &[u8]| tail.push(b)) {
            let parts: Vec<&str> = fields.split(':').collect();
            match (is_stdout, parts.as_slice()) {
                (true, ["", "end", code, left]) => {
                    self.ending.exit = code.parse().ok();
                    self.ending.left_processes = *left != "0";
                    self.ending.stdout_done = true;
                }
                (false, ["", "end"]) => self.ending.stderr_done = true,
                (false, ["", "pid", pid]) => {
                    if let Ok(pid) = pid.parse::<i64>() {
                        pgid.store(pid, Ordering::SeqCst);
                    }
                    continue;
                }
                _ => {
                    self.ending.stray = true;
                    continue;
                }
            }
            // An end frame: anything after it is not this command's.
            self.ending.stray |= frames.has_pending();
            break;
        }
    }

    /// The stream ended early: what was held back is output.
    fn flush(&mut self) {
        self.stdout_frames
            .finish(&mut |b: &[u8]| self.stdout.push(b));
        self.stderr_frames
            .finish(&mut |b: &[u8]| self.stderr.push(b));
    }
}

impl Docker {
    /// Starts a resident shell in a running container.
    async fn start_shell(
        &self,
        api: &bollard::Docker,
        container: &str,
        backend: &str,
    ) -> Result<ResidentShell, DockerError> {
        let options = CreateExecOptions {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(vec!["/bin/sh".to_string()]),
            ..Default::default()
        };
        let created = self
            .run(
                "create shell exec",
                OP_TIMEOUT,
                api.create_exec(container, options),
            )
            .await?;
        let (output, input) = self.start_attached(api, &created.id).await?;
        Ok(ResidentShell {
            backend: backend.to_string(),
            input,
            output,
            idle_since: Instant::now(),
        })
    }

    /// Whether a command that [`fits`](super::shell_line::fits) may go to a resident shell now: not while a
    /// one-off exec runs in the container, and, when something may have been left there,
    /// only once a check (run after the ownership check) found it clean.
    pub(crate) async fn shell_may_run(
        &self,
        owner: &Owner,
        container: &str,
    ) -> Result<bool, DockerError> {
        match self.shells().marks().route(container) {
            Route::Shell => Ok(true),
            Route::OneOff => Ok(false),
            Route::Check(epoch) => {
                self.require_running(owner, container).await?;
                let api = self.api().await?;
                let clean = check_clean(&api, container).await;
                if clean {
                    self.shells().marks().checked_clean(container, epoch);
                }
                Ok(clean)
            }
        }
    }

    /// Runs a request that [`fits`](super::shell_line::fits) in one of the container's resident shells: an idle
    /// one `backend` started if there is one, else a new one once `check` (ownership, and
    /// the container running) passed. Same contract as [`Docker::exec`].
    pub(crate) async fn exec_in_resident_shell(
        &self,
        backend: &str,
        request: ExecRequest,
        begun: Instant,
        check: impl std::future::Future<Output = Result<(), DockerError>>,
    ) -> Result<ExecOutput, DockerError> {
        let api = self.api().await?;
        let container = request.container.clone();
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let line = command_line(&nonce, &marker, &request);
        let running = ResidentRunning::new(self.shells().marks(), &container);

        // A pooled shell may have gone since its last use; the line was not run if it
        // could not be written, so a new shell gets it.
        let pooled = match self.shells().checkout(&container, backend) {
            Some(mut shell) => send(&mut shell, &line).await.ok().map(|()| shell),
            None => None,
        };
        let mut shell = match pooled {
            Some(shell) => shell,
            None => {
                check.await?;
                let mut shell = self.start_shell(&api, &container, backend).await?;
                send(&mut shell, &line).await.map_err(|e| {
                    DockerError::Failed(format!("could not send the command to the shell: {e}"))
                })?;
                shell
            }
        };

        let pgid = std::sync::Arc::new(AtomicI64::new(0));
        let target = KillTarget {
            api: api.clone(),
            container: container.clone(),
            marker,
            pgid: pgid.clone(),
        };
        let mut guard = KillGuard::arm(target.clone());
        let max = usize::try_from(request.max_output_bytes).unwrap_or(usize::MAX);
        let mut reading = Reading {
            stdout_frames: FrameScanner::new(&nonce),
            stderr_frames: FrameScanner::new(&nonce),
            stdout: Tail::new(max),
            stderr: Tail::new(max),
            ending: Ending::default(),
        };
        let deadline =
            TokioInstant::from_std(begun) + Duration::from_millis(u64::from(request.timeout_ms));

        let mut ended = false;
        let mut timed_out = false;
        while !reading.ending.done() && !ended {
            if TokioInstant::now() >= deadline {
                timed_out = true;
                break;
            }
            tokio::select! {
                item = shell.output.next() => match item {
                    Some(Ok(item)) => reading.take(item, &pgid),
                    _ => ended = true,
                },
                () = tokio::time::sleep_until(deadline) => timed_out = true,
            }
        }

        if timed_out {
            let drain_until = TokioInstant::now() + KILLED_DRAIN;
            let drain = async {
                while !reading.ending.done() && !ended {
                    match tokio::time::timeout_at(drain_until, shell.output.next()).await {
                        Ok(Some(Ok(item))) => reading.take(item, &pgid),
                        Ok(_) => ended = true,
                        Err(_) => break,
                    }
                }
            };
            guard.kill_while(drain).await;
        } else {
            guard.disarm();
        }

        if !reading.ending.done() {
            reading.flush();
        }
        let reusable = reading.ending.done()
            && !timed_out
            && !reading.ending.left_processes
            && !reading.ending.stray;
        if reusable {
            running.ended_clean();
            self.shells().check_in(&container, shell);
        } else {
            drop(running);
        }

        // A shell that vanished mid-command (the command killed it) reports no exit code,
        // like a killed command.
        let exit_code = reading
            .ending
            .stdout_done
            .then(|| reading.ending.exit.unwrap_or(-1));
        Ok(exec_output(
            reading.stdout.finish(),
            reading.stderr.finish(),
            exit_code,
            timed_out,
            begun,
        ))
    }
}

//! Running a command in an owned container: wrapped so it leads its own process group and
//! reports its pid, output streamed into bounded tails, stdin written then closed, a
//! timeout that kills the whole group, and a drop guard that does the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;

use super::client::{Docker, OP_TIMEOUT};
use super::container_body::env_strings;
use super::error::DockerError;
use super::kill::{KillGuard, KillTarget, MARKER_VAR};
use super::labels::shorten;
use super::output::{Stderr, Tail, exec_output};
use super::shell_line;
use super::types::{Command, ExecOutput, ExecRequest, InputSink, OutputStream, Owner};

/// The outer shell (a session leader in `docker exec`) starts, as a child that is not a
/// group leader, `setsid` + an inner shell: that one leads a new session and process
/// group, prints its pid (= pgid) as stderr's first line, then execs the command. The
/// trailing `exit $?` keeps shells from exec'ing the last command in place.
const WRAPPER: &str = r#"setsid /bin/sh -c 'echo "$$" >&2; exec "$@"' wharf-exec "$@"; exit $?"#;

/// Output still read after the main process exited (a backgrounded child may hold the
/// stream open forever).
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// Output still read after a kill, at most (normally the stream ends at once).
const KILLED_DRAIN: Duration = Duration::from_secs(2);
/// Exec inspect polling: first interval and cap.
const POLL_FIRST: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_millis(500);
/// Polls after the output ended before a missing exit code is taken as -1 (about 1 s).
const POLLS_AFTER_EOF: u32 = 20;

fn argv(command: &Command) -> Result<Vec<String>, DockerError> {
    let argv = match command {
        Command::Argv(argv) => {
            if argv.first().is_none_or(|a| a.is_empty()) {
                return Err(DockerError::Invalid("command must not be empty".into()));
            }
            argv.clone()
        }
        Command::Shell(script) => {
            if script.trim().is_empty() {
                return Err(DockerError::Invalid(
                    "shell command must not be empty".into(),
                ));
            }
            vec!["/bin/sh".to_string(), "-c".to_string(), script.clone()]
        }
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(DockerError::Invalid("command contains a NUL byte".into()));
    }
    let mut wrapped = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        WRAPPER.to_string(),
        "wharf-wrap".to_string(),
    ];
    wrapped.extend(argv);
    Ok(wrapped)
}

fn check_request(request: &ExecRequest) -> Result<(), DockerError> {
    if request.timeout_ms == 0 {
        return Err(DockerError::Invalid(
            "timeout_ms must be greater than 0".into(),
        ));
    }
    if let Some(dir) = &request.workdir
        && (!dir.starts_with('/') || dir.chars().any(char::is_control))
    {
        return Err(DockerError::Invalid(format!(
            "workdir must be an absolute path, got {:?}",
            shorten(dir)
        )));
    }
    if let Some(user) = &request.user
        && (user.is_empty() || user.chars().any(|c| c.is_control() || c.is_whitespace()))
    {
        return Err(DockerError::Invalid(format!(
            "bad user {:?}",
            shorten(user)
        )));
    }
    Ok(())
}

/// The output of one running exec.
struct Capture {
    stdout: Tail,
    stderr: Stderr,
    pgid: Arc<AtomicI64>,
}

impl Capture {
    fn take(&mut self, item: LogOutput) {
        match item {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                self.stdout.push(&message)
            }
            LogOutput::StdErr { message } => {
                if let Some(pid) = self.stderr.push(&message) {
                    self.pgid.store(pid, Ordering::SeqCst);
                }
            }
            LogOutput::StdIn { .. } => {}
        }
    }
}

impl Docker {
    /// Starts a created exec with its streams attached.
    pub(crate) async fn start_attached(
        &self,
        api: &bollard::Docker,
        exec_id: &str,
    ) -> Result<(OutputStream, InputSink), DockerError> {
        let start = StartExecOptions {
            detach: false,
            tty: false,
            output_capacity: Some(64 * 1024),
        };
        let started = self
            .run(
                "start exec",
                OP_TIMEOUT,
                api.start_exec(exec_id, Some(start)),
            )
            .await?;
        match started {
            StartExecResults::Attached { output, input } => Ok((output, input)),
            StartExecResults::Detached => Err(DockerError::Failed(
                "start exec: the engine did not attach the streams".into(),
            )),
        }
    }

    /// Checks that `owner` owns the container and that it is running.
    pub(crate) async fn require_running(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        let found = self.require_owned(owner, id).await?;
        if found.state.as_ref().and_then(|s| s.running) != Some(true) {
            return Err(DockerError::Failed(format!(
                "container {} is not running",
                shorten(id)
            )));
        }
        Ok(())
    }

    /// Runs a command in a running container `owner` owns. Output beyond
    /// `max_output_bytes` keeps the tail; past `timeout_ms` the command's whole process
    /// group is killed (`timed_out`, no exit code). Dropping the returned future kills it
    /// too. The call returns when the command exits, even if a background child keeps its
    /// output open. The image needs `/bin/sh` and `setsid` (busybox has both).
    pub async fn exec(
        &self,
        owner: &Owner,
        request: ExecRequest,
    ) -> Result<ExecOutput, DockerError> {
        self.exec_streamed(owner, request, None).await
    }

    /// [`Docker::exec`], passing the output to `output` as it is written when the
    /// container runs the sandbox agent.
    pub async fn exec_streamed(
        &self,
        owner: &Owner,
        request: ExecRequest,
        output: Option<&crate::call_output::OutputSink>,
    ) -> Result<ExecOutput, DockerError> {
        let begun = Instant::now();
        check_request(&request)?;
        // The agent's path needs no wrapper script: build it only for the engine's exec.
        if let Some(out) = self
            .exec_through_agent(owner, &request, begun, output)
            .await?
        {
            return Ok(out);
        }
        let mut request = request;
        if request.user.is_none() && self.agent_placement().is_some() {
            // The agent is the container's root PID 1: its sandbox user is in a label.
            request.user = self.sandbox_user_of(owner, &request.container).await?;
        }
        let cmd = argv(&request.command)?;
        let mut env = env_strings(&request.env)?;
        if shell_line::fits(&request) && self.shell_may_run(owner, &request.container).await? {
            let container = request.container.clone();
            let check = self.require_running(owner, &container);
            return self
                .exec_in_resident_shell(&owner.backend, request, begun, check)
                .await;
        }
        self.require_running(owner, &request.container).await?;
        // Its leftovers could read a resident shell's input (`leftovers.rs`).
        let _one_off = self.shells().marks().one_off(&request.container);
        let marker = uuid::Uuid::new_v4().simple().to_string();
        env.push(format!("{MARKER_VAR}={marker}"));
        let api = self.api().await?;
        let options = CreateExecOptions {
            attach_stdin: Some(request.stdin.is_some()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            env: Some(env),
            cmd: Some(cmd),
            user: request.user.clone(),
            working_dir: request.workdir.clone(),
            ..Default::default()
        };
        let created = self
            .run(
                "create exec",
                OP_TIMEOUT,
                api.create_exec(&request.container, options),
            )
            .await?;

        let pgid = Arc::new(AtomicI64::new(0));
        let target = KillTarget {
            api: api.clone(),
            container: request.container.clone(),
            marker,
            pgid: pgid.clone(),
        };
        let mut guard = KillGuard::arm(target.clone());

        let (mut output, mut input) = self.start_attached(&api, &created.id).await?;

        let max = usize::try_from(request.max_output_bytes).unwrap_or(usize::MAX);
        let mut capture = Capture {
            stdout: Tail::new(max),
            stderr: Stderr::new(max),
            pgid,
        };
        let deadline =
            TokioInstant::from_std(begun) + Duration::from_millis(u64::from(request.timeout_ms));

        // Stdin is written alongside reading output (a command may fill its output pipe
        // before it reads), then closed so the command sees EOF.
        let stdin = request.stdin;
        let mut stdin_done = stdin.is_none();
        let write_stdin = async {
            if let Some(data) = stdin {
                // A command that exits without reading breaks the pipe: not an error.
                let _ = input.write_all(&data).await;
                let _ = input.shutdown().await;
            }
        };
        tokio::pin!(write_stdin);

        let mut eof = false;
        let mut poll_every = POLL_FIRST;
        let mut next_poll = TokioInstant::now() + poll_every;
        let mut exit: Option<i64> = None;
        let mut timed_out = false;
        let mut polls_after_eof = 0u32;
        while exit.is_none() {
            // Checked here too: a command that never stops printing keeps the output
            // branch ready on every turn.
            if TokioInstant::now() >= deadline {
                timed_out = true;
                break;
            }
            tokio::select! {
                item = output.next(), if !eof => match item {
                    Some(Ok(item)) => capture.take(item),
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "exec output stream ended with an error");
                        eof = true;
                        next_poll = TokioInstant::now();
                    }
                    None => {
                        eof = true;
                        next_poll = TokioInstant::now();
                    }
                },
                () = &mut write_stdin, if !stdin_done => stdin_done = true,
                () = tokio::time::sleep_until(deadline) => {
                    timed_out = true;
                    break;
                }
                () = tokio::time::sleep_until(next_poll) => {
                    let state = self.run("inspect exec", OP_TIMEOUT, api.inspect_exec(&created.id)).await?;
                    // The engine answers the attach before it marks the exec running: not
                    // running with no exit code yet means "not started yet", unless the
                    // output already ended a while ago.
                    if eof {
                        polls_after_eof += 1;
                    }
                    if state.running == Some(false)
                        && (state.exit_code.is_some() || polls_after_eof > POLLS_AFTER_EOF)
                    {
                        exit = Some(state.exit_code.unwrap_or(-1));
                    } else {
                        poll_every = if eof { POLL_FIRST } else { (poll_every * 2).min(POLL_MAX) };
                        next_poll = TokioInstant::now() + poll_every;
                    }
                }
            }
        }

        if timed_out {
            // Output is read while the kill runs: the engine handles a container's exec
            // exits one after another, and the killed exec's exit (so the kill exec's own)
            // waits until its unread output has been delivered.
            let drain_until = TokioInstant::now() + KILLED_DRAIN;
            let drain = async {
                // Owned here so it is dropped (and the engine stops waiting on it) as soon
                // as the drain ends, even if the kill is still running.
                let mut output = output;
                while !eof {
                    match tokio::time::timeout_at(drain_until, output.next()).await {
                        Ok(Some(Ok(item))) => capture.take(item),
                        Ok(_) => eof = true,
                        Err(_) => break,
                    }
                }
            };
            guard.kill_while(drain).await;
        } else {
            guard.disarm();
            // A short grace only: a background child may hold the stream open.
            let grace = TokioInstant::now() + DRAIN_GRACE;
            while !eof {
                match tokio::time::timeout_at(grace, output.next()).await {
                    Ok(Some(Ok(item))) => capture.take(item),
                    Ok(_) => eof = true,
                    Err(_) => break,
                }
            }
            drop(output);
        }

        Ok(exec_output(
            capture.stdout.finish(),
            capture.stderr.finish(),
            exit.map(|c| i32::try_from(c).unwrap_or(-1)),
            timed_out,
            begun,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_wrapped() {
        let wrapped = argv(&Command::Argv(vec!["echo".into(), "hi".into()])).unwrap_or_default();
        assert_eq!(
            wrapped[..3],
            ["/bin/sh".to_string(), "-c".into(), WRAPPER.into()]
        );
        assert_eq!(wrapped[4..], ["echo".to_string(), "hi".into()]);
        let wrapped = argv(&Command::Shell("ls | wc -l".into())).unwrap_or_default();
        assert_eq!(
            wrapped[4..],
            ["/bin/sh".to_string(), "-c".into(), "ls | wc -l".into()]
        );
        assert!(argv(&Command::Argv(vec![])).is_err());
        assert!(argv(&Command::Shell("  ".into())).is_err());
    }

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn futures_are_send() {
        // Host imports run these inside wasmtime's async calls, which need `Send`.
        if let Ok(docker) = Docker::connect_to("unix:///nonexistent.sock", "n") {
            let owner = Owner::backend("b");
            let request = ExecRequest::new("x", Command::Shell("true".into()), 1, 1);
            assert_send(&docker.exec(&owner, request));
            assert_send(&docker.copy_in(&owner, "x", "/a", b"", 0o644));
            assert_send(&docker.copy_out(&owner, "x", "/a", 1));
            assert_send(&docker.create(&owner, &super::super::types::ContainerSpec::default()));
            assert_send(&docker.remove(&owner, "x"));
            assert_send(&docker.list_all_wharf());
        }
    }

    #[test]
    fn requests_are_checked() {
        let mut r = ExecRequest::new("x", Command::Shell("true".into()), 0, 10);
        assert!(check_request(&r).is_err());
        r.timeout_ms = 1000;
        assert!(check_request(&r).is_ok());
        r.workdir = Some("rel".into());
        assert!(check_request(&r).is_err());
    }
}

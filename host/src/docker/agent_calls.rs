//! Commands through a container's sandbox agent: which containers have one (the
//! `wharf.agent` label, remembered in `known_agents`), waiting for it at start, and a
//! command's run through it instead of the engine's exec. Background processes and port
//! relays are `agent_processes`.

use std::time::{Duration, Instant};

use wharf_sandbox_protocol::{
    self as protocol, ErrorKind, MAX_RUN_OUTPUT_BYTES, MAX_RUN_STDIN_BYTES, ProcessInfo,
    ProcessSetup, Reply, Request, RunRequest, SOCKET_DIR,
};

use crate::call_output::{OutputPiece, OutputSink, OutputStream};

use super::agent_client::{AgentEndpoint, ExpectedPeer, call, parent_of};
use super::agent_stream::AgentFailure;
use super::client::Docker;
use super::error::DockerError;
use super::labels::{LABEL_AGENT, LABEL_USER, shorten};
use super::sandbox_agent::{SOCKET_NAME, SocketHome, socket_of};
use super::types::{Command, ExecOutput, ExecRequest, Owner};

/// Time allowed on top of a command's own timeout before the agent counts as hung.
const AGENT_GRACE: Duration = Duration::from_secs(5);
/// The limit of a request that does not run a command.
pub(super) const QUICK_LIMIT: Duration = Duration::from_secs(10);
/// How long a just-started container's agent may take to listen.
const AGENT_START_LIMIT: Duration = Duration::from_secs(5);
/// Between two tries to reach a starting agent.
const AGENT_START_POLL: Duration = Duration::from_millis(5);

pub(super) fn agent_error(failure: AgentFailure) -> DockerError {
    match failure {
        AgentFailure::Refused(e) => match e.kind {
            ErrorKind::Invalid => DockerError::Invalid(e.message),
            ErrorKind::NotFound => DockerError::NotFound(e.message),
            ErrorKind::Limit | ErrorKind::Denied => DockerError::Refused(e.message),
            ErrorKind::Failed => DockerError::Failed(e.message),
        },
        AgentFailure::Unreachable(_) => DockerError::NotFound(failure.to_string()),
        AgentFailure::Impostor(_) | AgentFailure::Broken(_) => {
            DockerError::Failed(failure.to_string())
        }
    }
}

/// A process as the agent reported it, its command cut to the protocol's bound (the agent
/// runs inside the sandbox, so its answers are held to the protocol, not trusted to it).
pub(super) fn bounded(mut info: ProcessInfo) -> ProcessInfo {
    if info.command.len() > protocol::MAX_COMMAND_DISPLAY_BYTES {
        let mut end = protocol::MAX_COMMAND_DISPLAY_BYTES;
        while !info.command.is_char_boundary(end) {
            end -= 1;
        }
        info.command.truncate(end);
    }
    info
}

pub(super) fn unexpected(reply: &Reply) -> DockerError {
    DockerError::Failed(format!(
        "the sandbox agent answered out of turn ({})",
        shorten(&format!("{reply:?}"))
    ))
}

/// Whether a command fits what the agent carries in one reply (larger output or stdin
/// goes through the engine's exec, which streams them).
fn fits_agent(request: &ExecRequest) -> bool {
    request.max_output_bytes <= MAX_RUN_OUTPUT_BYTES
        && request
            .stdin
            .as_ref()
            .is_none_or(|s| s.len() <= MAX_RUN_STDIN_BYTES)
}

pub(super) fn protocol_command(command: &Command) -> protocol::Command {
    match command {
        Command::Argv(argv) => protocol::Command::Argv(argv.clone()),
        Command::Shell(line) => protocol::Command::Shell(line.clone()),
    }
}

impl Docker {
    /// The agent of an owned, running container that has one; `None` when the container
    /// has none, is not running, or is not `owner`'s (the caller's engine path then
    /// answers as it always did).
    pub(crate) async fn agent_of(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<AgentEndpoint>, DockerError> {
        if self.agent_placement().is_none() {
            return Ok(None);
        }
        if let Some(endpoint) = self
            .known_agents()
            .get(id, &owner.backend)
            .filter(AgentEndpoint::is_current)
        {
            return Ok(Some(endpoint));
        }
        let Some(found) = self.inspect_owned(owner, id).await? else {
            return Ok(None);
        };
        let home = found
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(LABEL_AGENT))
            .and_then(|value| SocketHome::from_label(value));
        let state = found.state.as_ref();
        let pid = state.and_then(|s| s.pid).unwrap_or(0);
        let running = state.and_then(|s| s.running) == Some(true);
        let pid = match i32::try_from(pid) {
            Ok(pid) if pid > 0 && running => pid,
            _ => return Ok(None),
        };
        let endpoint = match home {
            None => return Ok(None),
            Some(SocketHome::InContainer) => AgentEndpoint::Socket {
                socket: socket_of(pid.unsigned_abs()),
                peer: ExpectedPeer::Pid(pid),
            },
            Some(SocketHome::ThroughEngine) => AgentEndpoint::Engine(self.engine_link(id).await?),
            Some(SocketHome::OnHost) => {
                // The engine says where the volume is mounted and which process is the
                // container's; the runtime's processes are that one's siblings.
                let dir = found
                    .mounts
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .find(|m| {
                        m.destination.as_deref() == Some(SOCKET_DIR)
                            && m.typ.as_deref() == Some("volume")
                    });
                match (dir.and_then(|m| m.source.as_deref()), parent_of(pid)) {
                    (Some(dir), Some(shim)) if dir.starts_with('/') => AgentEndpoint::Socket {
                        socket: std::path::Path::new(dir).join(SOCKET_NAME),
                        peer: ExpectedPeer::ChildOf(shim),
                    },
                    _ => return Ok(None),
                }
            }
        };
        self.known_agents()
            .remember(id, &owner.backend, endpoint.clone());
        Ok(Some(endpoint))
    }

    /// The user an agent-run container's own processes run as (its `wharf.user` label),
    /// for commands that take the engine's exec, which would otherwise run as the agent's
    /// root.
    pub(crate) async fn sandbox_user_of(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, DockerError> {
        Ok(self.inspect_owned(owner, id).await?.and_then(|found| {
            found
                .config
                .and_then(|c| c.labels)
                .and_then(|mut labels| labels.remove(LABEL_USER))
                .filter(|user| !user.is_empty())
        }))
    }

    /// Waits until the agent of a just-started container answers (at most 5 s; a container
    /// without the agent returns at once). An agent that never answers is not an error
    /// here: commands then take the engine's exec.
    pub(crate) async fn await_agent(&self, owner: &Owner, id: &str) {
        let deadline = Instant::now() + AGENT_START_LIMIT;
        loop {
            // Asked each time: an engine link started before the agent listened is fine,
            // one that ended is started again.
            let Ok(Some(endpoint)) = self.agent_of(owner, id).await else {
                return;
            };
            match call(&endpoint, &Request::Hello, QUICK_LIMIT, |_, _| {}).await {
                Err(AgentFailure::Unreachable(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(AGENT_START_POLL).await;
                }
                Ok(_) => return,
                Err(failure) => {
                    tracing::warn!(container = %shorten(id), "the sandbox agent did not answer after start: {failure}");
                    self.known_agents().forget(id);
                    return;
                }
            }
        }
    }

    /// One request to the agent of an owned container that must have one.
    pub(super) async fn ask_agent(
        &self,
        owner: &Owner,
        id: &str,
        request: &Request,
        limit: Duration,
    ) -> Result<Reply, DockerError> {
        let Some(endpoint) = self.agent_of(owner, id).await? else {
            return Err(DockerError::Refused(format!(
                "container {} runs no sandbox agent (background processes need one)",
                shorten(id)
            )));
        };
        call(&endpoint, request, limit, |_, _| {})
            .await
            .map_err(|failure| {
                if !matches!(failure, AgentFailure::Refused(_)) {
                    self.known_agents().forget(id);
                }
                agent_error(failure)
            })
    }

    /// Runs `request` through the container's agent; `None` when the container has no
    /// agent or the command does not fit it (the caller then uses the engine's exec).
    pub(crate) async fn exec_through_agent(
        &self,
        owner: &Owner,
        request: &ExecRequest,
        begun: Instant,
        output: Option<&OutputSink>,
    ) -> Result<Option<ExecOutput>, DockerError> {
        if !fits_agent(request) {
            return Ok(None);
        }
        let run = Request::Run(RunRequest {
            command: protocol_command(&request.command),
            setup: ProcessSetup {
                env: request.env.clone(),
                cwd: request.workdir.clone(),
                user: request.user.clone(),
            },
            stdin: request.stdin.clone(),
            timeout_ms: request.timeout_ms,
            max_output_bytes: request.max_output_bytes,
            stream: output.is_some(),
        });
        let limit = Duration::from_millis(u64::from(request.timeout_ms)) + AGENT_GRACE;
        let mut answer = Err(AgentFailure::Broken(String::new()));
        // A restarted container has a new PID 1: the remembered one is refused once, then
        // looked up again.
        for _ in 0..2 {
            let Some(endpoint) = self.agent_of(owner, &request.container).await? else {
                return Ok(None);
            };
            let command = call(&endpoint, &run, limit, |stream, data| {
                if let Some(sink) = output {
                    let stream = match stream {
                        protocol::Stream::Stdout => OutputStream::Stdout,
                        protocol::Stream::Stderr => OutputStream::Stderr,
                    };
                    sink.send(OutputPiece { stream, data });
                }
            });
            answer = self.command_starts().run(command).await;
            if !matches!(answer, Err(AgentFailure::Impostor(_))) {
                break;
            }
            self.known_agents().forget(&request.container);
        }
        match answer {
            Ok(Reply::Ran(out)) => Ok(Some(ExecOutput {
                exit_code: out.exit_code,
                stdout: out.stdout,
                stderr: out.stderr,
                stdout_truncated: out.stdout_truncated,
                stderr_truncated: out.stderr_truncated,
                timed_out: out.timed_out,
                duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
            })),
            Ok(other) => Err(unexpected(&other)),
            // Stopped or gone since it was remembered: the engine's path says which.
            Err(AgentFailure::Unreachable(_)) => {
                self.known_agents().forget(&request.container);
                Ok(None)
            }
            Err(failure) => {
                if !matches!(failure, AgentFailure::Refused(_)) {
                    self.known_agents().forget(&request.container);
                }
                Err(agent_error(failure))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_oversized_command_is_cut_at_a_char_boundary() {
        let info = ProcessInfo {
            pid: 1,
            command: "é".repeat(protocol::MAX_COMMAND_DISPLAY_BYTES),
            running: true,
            exit_code: None,
            started_at_ms: 0,
            terminal: false,
            output_bytes: 0,
            dropped_bytes: 0,
        };
        let cut = bounded(info);
        assert!(cut.command.len() <= protocol::MAX_COMMAND_DISPLAY_BYTES);
        assert!(cut.command.len() > protocol::MAX_COMMAND_DISPLAY_BYTES - 2);
    }

    #[test]
    fn large_output_or_stdin_stays_on_the_engine_path() {
        let mut r = ExecRequest::new("c", Command::Shell("true".into()), 1000, 1024);
        assert!(fits_agent(&r));
        r.max_output_bytes = MAX_RUN_OUTPUT_BYTES + 1;
        assert!(!fits_agent(&r));
        r.max_output_bytes = 1;
        r.stdin = Some(vec![0; MAX_RUN_STDIN_BYTES + 1]);
        assert!(!fits_agent(&r));
    }
}

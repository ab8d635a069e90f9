//! Background processes and port relays through a container's sandbox agent (the
//! engine's `start_process` … `list_processes` and `connect_port`).

use std::time::Duration;

use wharf_sandbox_protocol::{
    self as protocol, MAX_CHUNK_BYTES, OutputChunk, OutputRequest, ProcessInfo, ProcessSetup,
    Reply, Request, StartRequest,
};

use crate::engines::container_types::{OutputRead, ProcessStart};

use super::agent_calls::{QUICK_LIMIT, agent_error, bounded, protocol_command, unexpected};
use super::agent_client::open_relay;
use super::agent_stream::{AgentFailure, AgentStream};
use super::client::Docker;
use super::error::DockerError;
use super::labels::shorten;
use super::types::Owner;

impl Docker {
    /// A relay to TCP `port` on an owned container's loopback, through its agent (which
    /// works whatever the container's network, `none` included).
    pub(crate) async fn connect_port(
        &self,
        owner: &Owner,
        id: &str,
        port: u16,
    ) -> Result<AgentStream, DockerError> {
        // A restarted container has a new PID 1: the remembered one is refused once, then
        // looked up again.
        for _ in 0..2 {
            let Some(endpoint) = self.agent_of(owner, id).await? else {
                return Err(DockerError::Refused(format!(
                    "container {} runs no sandbox agent (its ports are reached through one)",
                    shorten(id)
                )));
            };
            match open_relay(&endpoint, port, QUICK_LIMIT).await {
                Ok(stream) => return Ok(stream),
                Err(AgentFailure::Impostor(_)) => self.known_agents().forget(id),
                Err(failure) => {
                    if !matches!(failure, AgentFailure::Refused(_)) {
                        self.known_agents().forget(id);
                    }
                    return Err(agent_error(failure));
                }
            }
        }
        Err(DockerError::Failed(format!(
            "the sandbox agent's socket of container {} is held by another process",
            shorten(id)
        )))
    }

    /// Starts a background process in an owned container's agent.
    pub async fn start_process(
        &self,
        owner: &Owner,
        id: &str,
        start: ProcessStart,
    ) -> Result<ProcessInfo, DockerError> {
        // Never a weaker sandbox than asked: a sandbox made to run as a user runs no
        // process as another (the agent, root, would switch to any).
        if let Some(user) = &start.user
            && let Some(own) = self.sandbox_user_of(owner, id).await?
            && *user != own
        {
            return Err(DockerError::Refused(format!(
                "this sandbox runs as `{own}`: its processes cannot run as `{user}`"
            )));
        }
        let request = StartRequest {
            command: protocol_command(&start.command),
            setup: ProcessSetup {
                env: start.env,
                cwd: start.workdir,
                user: start.user,
            },
            terminal: start.terminal,
            buffer_bytes: start.buffer_bytes,
        };
        match self
            .ask_agent(owner, id, &Request::Start(request), QUICK_LIMIT)
            .await?
        {
            Reply::Process(info) => Ok(bounded(info)),
            other => Err(unexpected(&other)),
        }
    }

    /// Reads a background process's output from `offset`, waiting up to `wait_ms` for some.
    pub async fn process_output(
        &self,
        owner: &Owner,
        id: &str,
        read: OutputRead,
    ) -> Result<OutputChunk, DockerError> {
        let request = OutputRequest {
            pid: read.pid,
            offset: read.offset,
            max_bytes: read.max_bytes.min(MAX_CHUNK_BYTES),
            wait_ms: read.wait_ms.min(protocol::MAX_WAIT_MS),
        };
        let limit = Duration::from_millis(u64::from(request.wait_ms)) + QUICK_LIMIT;
        match self
            .ask_agent(owner, id, &Request::Output(request), limit)
            .await?
        {
            // The agent is inside the sandbox: never hand on more than was asked for.
            Reply::Output(mut chunk) => {
                chunk.data.truncate(request.max_bytes as usize);
                chunk.process = bounded(chunk.process);
                Ok(chunk)
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Sends a request the agent answers with `Done` (a stdin write, a signal, a resize).
    pub(super) async fn tell_agent(
        &self,
        owner: &Owner,
        id: &str,
        request: Request,
    ) -> Result<(), DockerError> {
        match self.ask_agent(owner, id, &request, QUICK_LIMIT).await? {
            Reply::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// The background processes of an owned container's agent, oldest first.
    pub async fn list_processes(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Vec<ProcessInfo>, DockerError> {
        match self
            .ask_agent(owner, id, &Request::List, QUICK_LIMIT)
            .await?
        {
            Reply::Processes(list) => Ok(list
                .into_iter()
                .take(protocol::MAX_PROCESSES)
                .map(bounded)
                .collect()),
            other => Err(unexpected(&other)),
        }
    }
}

/// The request writing `data` to a background process's stdin, then closing it when
/// `close`.
pub(super) fn input_request(pid: u32, data: Vec<u8>, close: bool) -> Result<Request, DockerError> {
    if data.len() > MAX_CHUNK_BYTES as usize {
        return Err(DockerError::TooLarge(format!(
            "stdin writes are at most {MAX_CHUNK_BYTES} bytes, got {}",
            data.len()
        )));
    }
    Ok(Request::Input { pid, data, close })
}

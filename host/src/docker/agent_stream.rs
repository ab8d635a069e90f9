//! One connection to a sandbox agent, however it is reached (its Unix socket, a stream on
//! an engine link), and why a request to an agent got no answer: the names the agent's
//! client and the engine link share.

use wharf_sandbox_protocol::AgentError;

/// One connection to an agent: a Unix socket, or a stream on an engine link. The engine's
/// port stream, so a port relay is handed on as it is.
pub(crate) type AgentStream = crate::engines::container_types::PortStream;

/// Why a request to the agent did not get an answer.
#[derive(Debug)]
pub(crate) enum AgentFailure {
    /// Nothing listens (the container stopped, or the agent is not up yet).
    Unreachable(std::io::Error),
    /// Something other than the container's PID 1 holds the socket.
    Impostor(Option<i32>),
    /// The connection broke, timed out, or carried something that is not the protocol.
    Broken(String),
    /// The agent refused the request.
    Refused(AgentError),
}

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentFailure::Unreachable(e) => write!(f, "the sandbox agent is not reachable: {e}"),
            AgentFailure::Impostor(pid) => write!(
                f,
                "the sandbox agent's socket is held by another process (pid {pid:?}), not the agent"
            ),
            AgentFailure::Broken(m) => write!(f, "the sandbox agent's connection failed: {m}"),
            AgentFailure::Refused(e) => f.write_str(&e.message),
        }
    }
}

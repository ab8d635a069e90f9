//! What both transports offer the backend: send a request and get its reply, with the
//! redactor of the secrets sent. The tool listing and the results are the same for both.
//! A transport that runs one server per Wharf session (stdio, `"per_session"`) also
//! answers the session hooks and sends a tool call to the call's session's server.

use crate::jsonrpc::Reply;
use crate::redact::Redactor;
use crate::session::McpSession;
use wharf_sdk::{Call, Discovery, Session, SessionNeed, ToolError, Value, json};

/// What a wait of the host's (`process.output`) or of the bridge's own answers when the
/// call's caller gave up (contract 0.3.0): the server is then told, and the call ends.
pub const CALLER_CANCELLED: u32 = 4990;

/// An MCP client of one backend instance.
pub trait McpClient {
    /// Called as a call (a tool call, a listing) begins: where a transport starts its
    /// deadline for the whole call.
    fn begin_call(&mut self) {}
    /// Sends request `method` and returns its reply.
    fn request(&mut self, method: &str, params: Option<Value>) -> Result<Reply, ToolError>;
    /// Sends request `method` of a tool call: to the server of the call's session where
    /// there is one per session (updating the session data when that server changed),
    /// else as [`McpClient::request`].
    fn call_request(
        &mut self,
        method: &str,
        params: Option<Value>,
        _call: &mut Call,
    ) -> Result<Reply, ToolError> {
        self.request(method, params)
    }
    /// Whether the listed tools need a session.
    fn session_need(&self) -> SessionNeed {
        SessionNeed::None
    }
    /// A new Wharf session's resources (`initialize`): its session data.
    fn open_session(&mut self, _session_id: &str) -> Result<Value, ToolError> {
        Ok(json!({}))
    }
    /// Releases a session's resources (`cleanup`); succeeds when they are gone.
    fn close_session(&mut self, _session: &Session) -> Result<(), ToolError> {
        Ok(())
    }
    /// Whether a stored session's resources still exist (`discover`).
    fn discover_session(&mut self, _session: &Session) -> Result<Discovery, ToolError> {
        Ok(Discovery::Alive)
    }
    /// What keeps the secrets sent out of errors and outputs.
    fn redactor(&self) -> &Redactor;
    /// Ends what the instance holds on the server, best effort (its `shutdown`).
    fn close(&mut self) {}
}

impl McpClient for McpSession {
    fn request(&mut self, method: &str, params: Option<Value>) -> Result<Reply, ToolError> {
        McpSession::request(self, method, params)
    }

    fn redactor(&self) -> &Redactor {
        McpSession::redactor(self)
    }

    fn close(&mut self) {
        McpSession::close(self);
    }
}

//! What both transports offer the backend: send a request and get its reply, with the
//! redactor of the secrets sent. The tool listing and the results are the same for both.

use crate::jsonrpc::Reply;
use crate::redact::Redactor;
use crate::session::McpSession;
use wharf_sdk::{ToolError, Value};

/// An MCP client of one backend instance.
pub trait McpClient {
    /// Called as a call (a tool call, a listing) begins: where a transport starts its
    /// deadline for the whole call.
    fn begin_call(&mut self) {}
    /// Sends request `method` and returns its reply.
    fn request(&mut self, method: &str, params: Option<Value>) -> Result<Reply, ToolError>;
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

//! What the host offers a backend: logs, key-value state, containers and commands in them.
//! Every call returns [`ToolError`](crate::ToolError)-compatible errors (`?` works).
//! Outbound HTTP is the standard `wasi:http/outgoing-handler`: use any wasi-http client.

pub use crate::bindings::backend_world::wharf::plugin::{container, exec, kv};

use crate::bindings::backend_world::wharf::plugin::log as wit_log;

/// Structured logs into the host's tracing, tagged with the backend and session.
pub mod log {
    use super::wit_log::{Level, log};
    /// Logs at debug level.
    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }
    /// Logs at info level.
    pub fn info(message: &str) {
        log(Level::Info, message)
    }
    /// Logs at warn level.
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
    /// Logs at error level.
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

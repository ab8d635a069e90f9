//! What the host offers a backend: logs, key-value state, containers and commands in them.
//! Every call returns [`ToolError`](crate::ToolError)-compatible errors (`?` works).
//! Outbound HTTP is the standard `wasi:http/outgoing-handler`: use any wasi-http client.

pub use crate::bindings::backend_world::wharf::plugin::{container, exec, kv};

use crate::bindings::backend_world::wharf::plugin::log as wit_log;

/// Sends a panic's message and location to the host before the trap that follows it, so
/// the caller sees it (`data.panic` of the failed call's error) and the host logs it.
/// Installed once per instance by the export glue.
pub(crate) fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with a non-string payload".to_string());
            let text = match info.location() {
                Some(at) => format!("{message} (at {}:{})", at.file(), at.line()),
                None => message,
            };
            wit_log::panic(&text);
        }));
    });
}

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

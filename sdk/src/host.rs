//! What the host offers a backend: logs, key-value state, containers and commands in them,
//! background processes in those containers, the secrets the operator granted it.
//! Every call returns [`ToolError`](crate::ToolError)-compatible errors (`?` works).
//! Outbound HTTP is [`crate::http`] (over the standard `wasi:http/outgoing-handler`).

pub use crate::bindings::backend_world::wharf::plugin0_2_0::{container, exec};

use crate::bindings::backend_world::wharf::plugin0_2_0::log as wit_log;

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

/// Key-value state kept by the host (SQLite or PostgreSQL), per backend or per session.
///
/// The raw calls take and return bytes; `get_json` / `set_json` store any serde type as
/// JSON. `increment` and `compare_and_swap` are atomic in the host, across pooled
/// instances and nodes: use them instead of a read-modify-write.
pub mod kv {
    use crate::ToolError;
    pub use crate::bindings::backend_world::wharf::plugin0_2_0::kv::{
        Scope, compare_and_swap, delete, get, increment, list_keys, set,
    };
    use serde::{Serialize, de::DeserializeOwned};

    /// The value under `key` parsed as JSON; `None` when absent. A value that is not the
    /// JSON of `T` is 5000.
    pub fn get_json<T: DeserializeOwned>(scope: Scope, key: &str) -> Result<Option<T>, ToolError> {
        match get(scope, key)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                ToolError::execution(format!(
                    "kv key `{key}` does not hold the JSON expected: {e}"
                ))
            }),
        }
    }

    /// Stores `value` as JSON under `key`.
    pub fn set_json<T: Serialize + ?Sized>(
        scope: Scope,
        key: &str,
        value: &T,
    ) -> Result<(), ToolError> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| ToolError::execution(format!("kv value for `{key}` is not JSON: {e}")))?;
        Ok(set(scope, key, &bytes)?)
    }

    /// Replaces the JSON value under `key` with `change(current)` atomically: retried with
    /// `compare_and_swap` until no other instance changed it meanwhile (at most `64` times,
    /// then 5000). Returns the stored value.
    pub fn update_json<T, F>(scope: Scope, key: &str, mut change: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> T,
    {
        for _ in 0..64 {
            let before = get(scope, key)?;
            let current = match &before {
                None => None,
                Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|e| {
                    ToolError::execution(format!(
                        "kv key `{key}` does not hold the JSON expected: {e}"
                    ))
                })?),
            };
            let next = change(current);
            let bytes = serde_json::to_vec(&next).map_err(|e| {
                ToolError::execution(format!("kv value for `{key}` is not JSON: {e}"))
            })?;
            if compare_and_swap(scope, key, before.as_deref(), Some(bytes.as_slice()))? {
                return Ok(next);
            }
        }
        Err(ToolError::execution(format!(
            "kv key `{key}` kept changing under this update; try again"
        ))
        .retryable())
    }
}

/// Secrets the operator granted this backend by name (`[backends.NAME.grants.secrets]`,
/// contract 0.3.0), so they need not travel inside the backend's config. The host reads
/// each value from where the operator keeps it when it is asked: call `get` when the value
/// is needed rather than keeping it, and a rotated secret is picked up.
pub mod secrets {
    use crate::ToolError;
    use crate::bindings::backend_world::wharf::plugin0_3_0::secrets as wit_secrets;

    /// The value granted under `name`: 4030 when this backend was not granted it, 4000 for
    /// a malformed name, 5012 when the host cannot read it where the operator keeps it.
    pub fn get(name: &str) -> Result<String, ToolError> {
        Ok(wit_secrets::get(name)?)
    }

    /// The names of the secrets granted to this backend, sorted (never their values).
    pub fn names() -> Vec<String> {
        wit_secrets::names()
    }
}

/// Background processes in the backend's own containers (contract 0.3.0), run by the
/// sandbox agent that is PID 1 of every container the host creates: start one, read its
/// output from any offset (waiting for more), write to its stdin, signal it, list them.
/// A process outlives the call that started it and a restart of the host; its recent
/// output (1 MiB by default) waits in the agent.
pub mod process {
    pub use crate::bindings::backend_world::wharf::plugin0_3_0::process::{
        ProcessInfo, ProcessOutput, ProcessSpec, Signal, list, output, send_signal, start,
        write_stdin,
    };
}

/// Files in the backend's own containers (contract 0.3.0), through the same sandbox agent,
/// as the container's user and with no shell in the image needed: `stat`, `read` (a piece
/// and the file's size), `write` (replace or append; parent directories made), `list`.
pub mod files {
    pub use crate::bindings::backend_world::wharf::plugin0_3_0::files::{
        FileData, FileInfo, FileKind, list, read, stat, write,
    };
}

/// The engine's freezer on the backend's own containers (contract 0.3.0): `pause` keeps a
/// container's memory and processes and stops it using CPU; `resume` continues it where
/// it was (both idempotent); `commit` snapshots its filesystem to the image the host named
/// for the call (a provider's `snapshot`).
pub mod freezer {
    pub use crate::bindings::backend_world::wharf::plugin0_3_0::freezer::{commit, pause, resume};
}

/// Containers made the way a session's sandbox is (contract 0.3.0), for a backend that
/// runs code it does not trust in containers of its own: an isolation level, a user, and
/// egress only through the host's proxy to the names and ranges listed, each inside the
/// backend's grants (4030 otherwise). Start and remove them with [`crate::host::container`].
pub mod sandboxing {
    pub use crate::bindings::backend_world::wharf::plugin0_3_0::sandboxing::{
        SandboxOptions, create,
    };
}

/// How far the call in progress has come (contract 0.3.0), passed to a caller that asked to
/// hear it (an MCP client's `progressToken`, a streaming REST call) and dropped otherwise.
/// `progress` must be finite, at least 0 and larger than the call's last report; `total`,
/// when known, finite and positive (else 4000).
pub mod progress {
    use crate::ToolError;
    use crate::bindings::backend_world::wharf::plugin0_3_0::progress as wit_progress;

    /// Reports `progress` out of `total`, with a message for people.
    pub fn report(
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ToolError> {
        Ok(wit_progress::report(progress, total, message)?)
    }
}

/// Whether the call in progress is still wanted (contract 0.3.0). A caller that gives up
/// leaves the call about a second to end: a backend waiting on something of its own (a
/// `wasi:io` pollable) asks between short waits, tells what it waits on, and returns.
/// Host imports that wait (`process::output`) end at once with 4990 by themselves.
pub mod cancellation {
    pub use crate::bindings::backend_world::wharf::plugin0_3_0::cancellation::cancelled;
}

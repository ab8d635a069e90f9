//! The named code sets and parameter lists of the table, most shared by several routes:
//! what a tool call, acquiring or releasing a session, the session rows, a file and MCP's
//! transport can answer, and the parameters of MCP, a sandbox's files and the
//! compatibility API's session lists.

use super::{Param, ParamKind, param};
use crate::error_code::Code::{self, *};

/// What any route on a session can answer: the session found (the caller's, its backend
/// on the token's allowlist), its fields read, and the store reached.
const ON_SESSION: &[Code] = &[
    Success,
    MissingField,
    InvalidType,
    SessionNotFound,
    Forbidden,
    DependencyFailure,
    Internal,
];
/// What running a backend's code can answer, beyond [`ON_SESSION`]: the host's
/// refusals, the backend's own codes, and what running costs.
const RUN: &[Code] = &with::<14>(
    ON_SESSION,
    &[
        InvalidInput,
        BusinessFailure,
        InvalidRequest,
        RateLimited,
        ExecutionError,
        Timeout,
        BackendUnavailable,
    ],
);

/// `base` and `more` as one list. `N` is their length together: a smaller one does not
/// compile (the copy runs out of room), a larger one only repeats `Success`.
const fn with<const N: usize>(base: &[Code], more: &[Code]) -> [Code; N] {
    let mut out = [Success; N];
    let mut i = 0;
    while i < base.len() {
        out[i] = base[i];
        i += 1;
    }
    let mut j = 0;
    while j < more.len() {
        out[i + j] = more[j];
        j += 1;
    }
    out
}

/// A tool call: the host's refusals, the backend's own codes, and what running costs.
pub(super) const CALL: &[Code] = &with::<15>(RUN, &[NoResults]);
/// Acquiring a session: the backend's `initialize` runs, under the tenant's quotas.
pub(super) const ACQUIRE: &[Code] = &with::<15>(RUN, &[Conflict]);
/// Ending sessions: the backend's `cleanup` runs.
pub(super) const RELEASE: &[Code] = &with::<9>(ON_SESSION, &[ExecutionError, Timeout]);
/// Reading or touching session rows (a paused session is not refreshed: 4090).
pub(super) const SESSION_ROWS: &[Code] = &with::<8>(ON_SESSION, &[Conflict]);
/// Pausing or resuming a session's sandbox: the provider's `suspension` export runs.
pub(super) const SUSPEND: &[Code] =
    &with::<12>(RELEASE, &[InvalidInput, Conflict, BackendUnavailable]);
/// A terminal opened (the refusals before the upgrade; after it, the WebSocket's own
/// messages).
pub(super) const TERMINAL: &[Code] = &[
    Success,
    InvalidInput,
    InvalidRequest,
    SessionNotFound,
    Forbidden,
    Conflict,
    RateLimited,
    ExecutionError,
    BackendUnavailable,
    DependencyFailure,
    Internal,
];
/// The query of a terminal.
pub(super) const TERMINAL_QUERY: &[Param] = &[
    param(
        "ticket",
        false,
        "A single-use ticket from POST /v1/sessions/{id}/terminal/tickets, for a client that cannot send Authorization (a browser's WebSocket); not read when the request has a valid token",
    ),
    param("cols", false, "Columns, 1-1000 (default 80)").kind(ParamKind::Integer { min: 1, max: 1000 }),
    param("rows", false, "Rows, 1-1000 (default 24)").kind(ParamKind::Integer { min: 1, max: 1000 }),
    param(
        "pid",
        false,
        "Attach to this terminal process of the session's (its output of the last 64 KiB first) instead of starting one; it keeps running when the socket closes",
    )
    .kind(ParamKind::Integer { min: 0, max: 4294967295 }),
    param(
        "command",
        false,
        "A command line to run on the new terminal instead of the shell (at most 4096 bytes, no NUL); it is hung up (SIGHUP) when the socket closes",
    )
    .kind(ParamKind::TextUpTo(1024)),
];
/// A preview URL minted.
pub(super) const PREVIEWS: &[Code] = &with::<8>(ON_SESSION, &[InvalidInput]);
/// A file moved in or out of a sandbox.
pub(super) const FILES: &[Code] = &with::<13>(
    RELEASE,
    &[
        InvalidInput,
        InvalidRequest,
        PayloadTooLarge,
        BackendUnavailable,
    ],
);

/// MCP's transport: its own refusals in Wharf's codes (a bad message, an unknown MCP
/// session or one another token opened, a failure inside the transport); 202, 405 and 406
/// have no code and are added by the builder.
pub(super) const MCP: &[Code] = &[
    Success,
    InvalidRequest,
    SessionNotFound,
    Forbidden,
    Internal,
];

/// The MCP session a request belongs to, and the key of the Wharf sessions its tools use.
pub(super) const MCP_POST_HEADERS: &[Param] = &[
    param(
        "Mcp-Session-Id",
        false,
        "The MCP session (from `initialize`'s answer); absent only on `initialize`",
    ),
    param(
        "X-Wharf-Session-Key",
        false,
        "Key of the Wharf sessions the calls' tools use (else the MCP session)",
    ),
];
pub(super) const MCP_SESSION: &[Param] = &[param(
    "Mcp-Session-Id",
    true,
    "The MCP session (from `initialize`'s answer)",
)];

pub(super) const FILE_PATH: &[Param] = &[param(
    "path",
    true,
    "The file (or, through the sandbox agent, the directory) in the sandbox",
)];

/// What a path is, or a directory's entries, through the sandbox agent.
pub(super) const FILE_INFO: &[Code] = &with::<11>(
    SESSION_ROWS,
    &[InvalidInput, InvalidRequest, ExecutionError],
);
/// A watch: as [`FILE_INFO`], and the host's watch slots.
pub(super) const WATCH: &[Code] = &with::<13>(FILE_INFO, &[RateLimited, Timeout]);
pub(super) const INFO_PATH: &[Param] = &[param(
    "path",
    true,
    "The path in the sandbox (relative: from its working directory); 1-4096 bytes",
)];
pub(super) const WATCH_QUERY: &[Param] = &[
    param(
        "path",
        true,
        "The directory (or file) watched; 1-4096 bytes",
    ),
    param(
        "recursive",
        false,
        "Follow subdirectories too (at most 4096 directories); default false",
    ),
    param(
        "timeout_seconds",
        false,
        "How long the watch runs, 1-3600 (default 300)",
    )
    .kind(ParamKind::Integer { min: 1, max: 3600 }),
];

pub(super) const WORKER_QUERY: &[Param] = &[
    param("worker_id", false, "Only this worker's sessions"),
    param("resource_type", false, "Only this backend's sessions"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_set_names_each_code_once() {
        let sets = [
            ON_SESSION,
            RUN,
            CALL,
            ACQUIRE,
            RELEASE,
            SESSION_ROWS,
            SUSPEND,
            TERMINAL,
            PREVIEWS,
            FILES,
            MCP,
            FILE_INFO,
            WATCH,
        ];
        for set in sets {
            let mut seen = set.to_vec();
            seen.sort_by_key(|c| c.as_u32());
            seen.dedup();
            assert_eq!(seen.len(), set.len(), "{set:?}");
        }
        assert!(CALL.contains(&NoResults) && !ACQUIRE.contains(&NoResults));
        assert!(WATCH.contains(&Conflict) && WATCH.contains(&Timeout));
    }
}

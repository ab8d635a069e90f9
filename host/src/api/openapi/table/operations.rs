//! The table itself: every route `/openapi.json` documents, built with the helpers of
//! `table` (the host's own API, MCP, the admin routes, then the compatibility API).

use super::shared::{
    ACQUIRE, CALL, FILE_INFO, FILE_PATH, FILES, INFO_PATH, MCP, MCP_POST_HEADERS, MCP_SESSION,
    PREVIEWS, RELEASE, SESSION_ROWS, SUSPEND, TERMINAL, TERMINAL_QUERY, WATCH, WATCH_QUERY,
    WORKER_QUERY,
};
use super::{Body, Operation, Reply, body, delete, get, param, post, put};
use crate::api::call_request::CallRequest;
use crate::api::compat::{BatchBody, CreateBody, ExecuteBody, ListBody, WorkerBody, WorkerOnly};
use crate::api::preview_links::{PreviewReply, PreviewRequest, PreviewsRevoked};
use crate::api::session_reply::{SessionList, SessionReply};
use crate::api::snapshots::{ForkReply, ForkRequest, SnapshotList, SnapshotRequest};
use crate::api::terminal::TicketReply;
use crate::api::volumes::{VolumeList, VolumeRequest};
use crate::config::TokenScope::{Admin, Call, Read};
use crate::error_code::Code::*;
use crate::front_door::SessionRequest;
use crate::snapshot_record::SnapshotRecord;
use crate::volume_record::VolumeRecord;

/// Every route.
pub(in crate::api::openapi) const OPERATIONS: &[Operation] = &[
    get("/healthz", "Liveness"),
    get(
        "/.well-known/oauth-protected-resource",
        "OAuth protected-resource metadata (RFC 9728): the authorization servers and scopes; also at /.well-known/oauth-protected-resource/PATH when the resource has a path. Only with [auth.oauth]",
    )
    .reply(Reply::Document)
    .oauth_only(),
    get(
        "/readyz",
        "Readiness: at least one backend loaded (else 5011)",
    )
    .codes(&[Success, BackendUnavailable]),
    get("/metrics", "Prometheus metrics (OpenMetrics text)")
        .scope(Read)
        .reply(Reply::Metrics)
        .codes(&[Success, Internal]),
    get(
        "/openapi.json",
        "This document: the routes this host serves, as configured",
    )
    .reply(Reply::Document),
    get("/v1/backends", "Loaded backends, versions, state, tools")
        .scope(Read)
        .codes(&[Success, Internal]),
    get(
        "/v1/quotas",
        "The caller's quotas and use (admins: every tenant's)",
    )
    .scope(Read)
    .codes(&[Success, DependencyFailure, Internal]),
    get(
        "/v1/tools",
        "Every tool with its input schema, annotations and session need",
    )
    .scope(Read)
    .codes(&[Success, Internal]),
    post(
        "/v1/sessions",
        "Acquire the session of (token, backend, key): the same key gives the same session",
    )
    .scope(Call)
    .body(body::<SessionRequest>(true))
    .data::<SessionReply>()
        .codes(ACQUIRE),
    get("/v1/sessions", "Sessions of the caller")
        .scope(Read)
        .query(&[
            param("backend", false, "Only this backend's sessions"),
            param("key", false, "Only the session of this key"),
        ])
        .data::<SessionList>()
        .codes(SESSION_ROWS),
    get("/v1/sessions/{id}", "One session")
        .scope(Read)
        .data::<SessionReply>()
        .codes(SESSION_ROWS),
    delete(
        "/v1/sessions/{id}",
        "Release a session (cleanup); idempotent",
    )
    .scope(Call)
    .codes(RELEASE),
    post("/v1/sessions/{id}/refresh", "Extend the idle TTL")
        .scope(Call)
        .data::<SessionReply>()
        .codes(SESSION_ROWS),
    post(
        "/v1/sessions/{id}/pause",
        "Pause the session's sandbox (memory and processes kept, no CPU); idempotent",
    )
    .scope(Call)
    .data::<SessionReply>()
    .codes(SUSPEND),
    post(
        "/v1/sessions/{id}/resume",
        "Resume a paused session's sandbox where it was; idempotent",
    )
    .scope(Call)
    .data::<SessionReply>()
    .codes(SUSPEND),
    post(
        "/v1/sessions/{id}/snapshots",
        "Snapshot the session's sandbox filesystem to an image (not its memory or processes)",
    )
    .scope(Call)
    .body(body::<SnapshotRequest>(false))
    .data::<SnapshotRecord>()
    .codes(SUSPEND),
    post(
        "/v1/sessions/{id}/fork",
        "Make `count` sessions from a snapshot of this one, at once; all or none",
    )
    .scope(Call)
    .body(body::<ForkRequest>(true))
    .data::<ForkReply>()
    .codes(ACQUIRE),
    get("/v1/snapshots", "The caller's snapshots (an admin: every tenant's)")
        .scope(Read)
        .data::<SnapshotList>()
        .codes(SESSION_ROWS),
    get("/v1/snapshots/{id}", "One snapshot")
        .scope(Read)
        .data::<SnapshotRecord>()
        .codes(SESSION_ROWS),
    delete(
        "/v1/snapshots/{id}",
        "Delete a snapshot (refused with 4090 while a sandbox runs from it)",
    )
    .scope(Call)
    .codes(SUSPEND),
    post(
        "/v1/volumes",
        "Create a named volume of the caller's tenant (4090 when the name is taken; the `volumes` quota counts them)",
    )
    .scope(Call)
    .body(body::<VolumeRequest>(true))
    .data::<VolumeRecord>()
    .codes(SUSPEND),
    get("/v1/volumes", "The caller's volumes (an admin: every tenant's)")
        .scope(Read)
        .data::<VolumeList>()
        .codes(SESSION_ROWS),
    get(
        "/v1/volumes/{volume}",
        "One volume, by id or by a name of the caller's tenant",
    )
    .scope(Read)
    .data::<VolumeRecord>()
    .codes(SESSION_ROWS),
    delete(
        "/v1/volumes/{volume}",
        "Delete a volume and its files (refused with 4090 while a sandbox mounts it)",
    )
    .scope(Call)
    .codes(SUSPEND),
    post(
        "/v1/sessions/{id}/previews",
        "Mint a signed preview URL for a port the session exposes (served on the preview listener)",
    )
    .scope(Call)
    .body(body::<PreviewRequest>(true))
    .data::<PreviewReply>()
    .codes(PREVIEWS),
    delete(
        "/v1/sessions/{id}/previews",
        "Revoke every signed preview URL of the session",
    )
    .scope(Call)
    .data::<PreviewsRevoked>()
    .codes(SESSION_ROWS),
    post(
        "/v1/sessions/{id}/terminal/tickets",
        "Mint a single-use ticket (valid 30 s) that opens the session's terminal without a token (a browser's WebSocket cannot send Authorization)",
    )
    .scope(Call)
    .data::<TicketReply>()
    .codes(SESSION_ROWS),
    get(
        "/v1/sessions/{id}/terminal",
        "Open a terminal in the session's sandbox: upgrades to a WebSocket (binary output from the host; input as binary or text; a text {\"type\":\"resize\",\"cols\":C,\"rows\":R} resizes; the host's text messages are opened, dropped, exit and error)",
    )
    .scope(Call)
    .query(TERMINAL_QUERY)
    .reply(Reply::WebSocket)
    .codes(TERMINAL),
    delete("/v1/sessions/{id}/claim", "Release your holder claim")
        .scope(Call)
        .query(&[param("holder", true, "The holder whose claim ends")])
        .codes(SESSION_ROWS),
    get(
        "/v1/sessions/{id}/files",
        "Stream a file out of a sandbox session; a directory comes as a tar stream",
    )
    .scope(Call)
    .query(FILE_PATH)
    .reply(Reply::FileOrTar)
    .codes(FILES),
    put(
        "/v1/sessions/{id}/files",
        "Stream a file into a sandbox session; a tar stream (Content-Type: application/x-tar) is unpacked into the directory path",
    )
    .scope(Call)
    .body(Body::FileOrTar)
    .query(FILE_PATH)
    .codes(FILES),
    get(
        "/v1/sessions/{id}/files/info",
        "What a path in the sandbox is (name, kind, size, mode, uid, gid, modified_ms, link_target), through the sandbox agent, as the sandbox's user",
    )
    .scope(Call)
    .query(INFO_PATH)
    .codes(FILE_INFO),
    get(
        "/v1/sessions/{id}/files/list",
        "A directory's entries (at most 10,000, sorted by name; the rest counted in truncated), through the sandbox agent, as the sandbox's user",
    )
    .scope(Call)
    .query(INFO_PATH)
    .codes(FILE_INFO),
    get(
        "/v1/sessions/{id}/files/watch",
        "Stream the changes under a path (inotify in the sandbox) as newline-delimited JSON; the response starts once the watch is up",
    )
    .scope(Call)
    .query(WATCH_QUERY)
    .reply(Reply::Lines)
    .codes(WATCH),
    post("/v1/call", "Run a tool")
        .scope(Call)
        .body(body::<CallRequest>(true))
        .reply(Reply::EnvelopeOrLines)
        .codes(CALL),
    post("/mcp", "MCP over streamable HTTP (JSON-RPC)")
        .scope(Read)
        .body(Body::JsonRpc)
        .headers(MCP_POST_HEADERS)
        .reply(Reply::Mcp)
        .codes(MCP),
    get("/mcp", "MCP server-to-client event stream")
        .scope(Read)
        .headers(MCP_SESSION)
        .reply(Reply::Mcp)
        .codes(MCP),
    delete("/mcp", "End an MCP session")
        .scope(Read)
        .headers(MCP_SESSION)
        .reply(Reply::Mcp)
        .codes(MCP),
    put(
        "/v1/admin/backends/{name}",
        "Load or replace a backend from a .wasm body (kept, and loaded again at start)",
    )
    .scope(Admin)
    .body(Body::Bytes)
    .query(&[param(
        "sha256",
        false,
        "The upload's SHA-256 (hex): refused unless it matches",
    )])
    .codes(&[
        Success,
        InvalidInput,
        InvalidRequest,
        PayloadTooLarge,
        Conflict,
        DependencyFailure,
        Internal,
    ]),
    delete("/v1/admin/backends/{name}", "Drain and unload a backend")
        .scope(Admin)
        .codes(&[Success, Internal]),
    post(
        "/v1/admin/backends/{name}/approve",
        "Approve a pending upgrade",
    )
    .scope(Admin)
    .codes(&[Success, InvalidRequest, Internal]),
    post(
        "/v1/admin/backends/{name}/reject",
        "Drop a pending upgrade (the running version keeps serving)",
    )
    .scope(Admin)
    .codes(&[Success, InvalidRequest, Internal]),
    get("/health", "Compatibility: liveness"),
    get("/ready", "Compatibility: readiness").codes(&[Success, BackendUnavailable]),
    post(
        "/api/v1/session/create",
        "Compatibility: create a worker's session",
    )
    .scope(Call)
    .body(body::<CreateBody>(true))
    .codes(ACQUIRE),
    post(
        "/api/v1/session/destroy",
        "Compatibility: destroy a worker's session(s)",
    )
    .scope(Call)
    .body(body::<WorkerBody>(true))
    .codes(RELEASE),
    post("/api/v1/session/list", "Compatibility: list sessions")
        .scope(Read)
        .body(body::<ListBody>(false))
        .query(WORKER_QUERY)
        .codes(SESSION_ROWS),
    get("/api/v1/session/list", "Compatibility: list sessions")
        .scope(Read)
        .query(WORKER_QUERY)
        .codes(SESSION_ROWS),
    post(
        "/api/v1/session/refresh",
        "Compatibility: refresh a worker's session(s)",
    )
    .scope(Call)
    .body(body::<WorkerBody>(true))
    .codes(SESSION_ROWS),
    post("/api/v1/execute", "Compatibility: run one action")
        .scope(Call)
        .body(body::<ExecuteBody>(true))
        .codes(CALL),
    post(
        "/api/v1/execute/batch",
        "Compatibility: run several actions (5010 when some did not succeed; when none did, 4000 if every failure was the caller's, else 5009)",
    )
    .scope(Call)
    .body(body::<BatchBody>(true))
    .codes(&[
        Success,
        InvalidInput,
        InvalidRequest,
        MissingField,
        InvalidType,
        Forbidden,
        BatchAllFailed,
        BatchPartialFailure,
        Internal,
    ]),
    get("/api/v1/tools", "Compatibility: list tools")
        .scope(Read)
        .query(&[param(
            "include_hidden",
            false,
            "Accepted and ignored (the replaced server's client sends it): Wharf has no hidden tools",
        )])
        .codes(&[Success, Internal]),
    get(
        "/api/v1/tools/{name}/schema",
        "Compatibility: one tool's schema",
    )
    .scope(Read)
    .codes(&[
        Success,
        InvalidRequest,
        Forbidden,
        BackendUnavailable,
        Internal,
    ]),
    post(
        "/api/v1/lifecycle/heartbeat",
        "Compatibility: keep a worker's sessions alive",
    )
    .scope(Call)
    .body(body::<WorkerOnly>(true))
    .codes(SESSION_ROWS),
    post(
        "/api/v1/worker/disconnect",
        "Compatibility: destroy a worker's sessions",
    )
    .scope(Call)
    .body(body::<WorkerOnly>(true))
    .codes(RELEASE),
];

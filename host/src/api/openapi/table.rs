//! The operation table `/openapi.json` is built from: each route with the request types its
//! handler parses, its parameters, what it answers with, and the codes the handler itself
//! can answer (the refusals every route shares, such as 4030 at the edge or 4150 for a body
//! of another type, are added by the builder).

use crate::api::compat::{BatchBody, CreateBody, ExecuteBody, ListBody, WorkerBody, WorkerOnly};
use crate::api::session_reply::{SessionList, SessionReply};
use crate::config::TokenScope::{self, Admin, Call, Read};
use crate::error_code::Code::{self, *};
use crate::front_door::{CallRequest, SessionRequest};
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// One documented operation.
pub(super) struct Operation {
    pub(super) method: &'static str,
    pub(super) path: &'static str,
    pub(super) summary: &'static str,
    /// `None`: open to anyone; else the scope a token needs (when tokens are configured).
    pub(super) scope: Option<TokenScope>,
    pub(super) body: Body,
    pub(super) query: &'static [Param],
    pub(super) headers: &'static [Param],
    pub(super) reply: Reply,
    /// The codes the handler answers (success included).
    pub(super) codes: &'static [Code],
    /// The schema of a success's `data`, when the handler answers a reply type.
    pub(super) data: Option<fn(&mut SchemaGenerator) -> Schema>,
}

impl Operation {
    const fn new(method: &'static str, path: &'static str, summary: &'static str) -> Self {
        Self {
            method,
            path,
            summary,
            scope: None,
            body: Body::None,
            query: &[],
            headers: &[],
            reply: Reply::Envelope,
            codes: &[Success],
            data: None,
        }
    }
    const fn data<T: JsonSchema>(mut self) -> Self {
        self.data = Some(json::<T>);
        self
    }
    const fn scope(mut self, scope: TokenScope) -> Self {
        self.scope = Some(scope);
        self
    }
    const fn body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }
    const fn query(mut self, query: &'static [Param]) -> Self {
        self.query = query;
        self
    }
    const fn headers(mut self, headers: &'static [Param]) -> Self {
        self.headers = headers;
        self
    }
    const fn reply(mut self, reply: Reply) -> Self {
        self.reply = reply;
        self
    }
    const fn codes(mut self, codes: &'static [Code]) -> Self {
        self.codes = codes;
        self
    }
}

const fn get(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("get", path, summary)
}
const fn post(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("post", path, summary)
}
const fn put(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("put", path, summary)
}
const fn delete(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("delete", path, summary)
}

/// A query or header parameter.
pub(super) struct Param {
    pub(super) name: &'static str,
    pub(super) required: bool,
    pub(super) description: &'static str,
}

/// What a request carries.
pub(super) enum Body {
    None,
    /// A JSON object of the handler's request type; `required: false` when an empty body
    /// is read as `{}`.
    Json {
        schema: fn(&mut SchemaGenerator) -> Schema,
        required: bool,
    },
    /// Raw bytes (`application/octet-stream`, `application/wasm`, or untyped).
    Bytes,
    /// A JSON-RPC message (MCP).
    JsonRpc,
}

/// What a success answers with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// The envelope, JSON.
    Envelope,
    /// This document.
    Document,
    /// OpenMetrics text.
    Metrics,
    /// A file's bytes.
    Octets,
    /// MCP's streamable HTTP: a JSON-RPC answer as JSON or as an event stream.
    Mcp,
}

fn json<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

const fn body<T: JsonSchema>(required: bool) -> Body {
    Body::Json {
        schema: json::<T>,
        required,
    }
}

const fn param(name: &'static str, required: bool, description: &'static str) -> Param {
    Param {
        name,
        required,
        description,
    }
}

/// A tool call: the host's refusals, the backend's own codes, and what running costs.
const CALL: &[Code] = &[
    Success,
    InvalidInput,
    BusinessFailure,
    InvalidRequest,
    MissingField,
    InvalidType,
    NoResults,
    SessionNotFound,
    Forbidden,
    RateLimited,
    ExecutionError,
    Timeout,
    BackendUnavailable,
    DependencyFailure,
    Internal,
];
/// Acquiring a session: the backend's `initialize` runs, under the tenant's quotas.
const ACQUIRE: &[Code] = &[
    Success,
    InvalidInput,
    BusinessFailure,
    InvalidRequest,
    MissingField,
    InvalidType,
    SessionNotFound,
    Forbidden,
    Conflict,
    RateLimited,
    ExecutionError,
    Timeout,
    BackendUnavailable,
    DependencyFailure,
    Internal,
];
/// Ending sessions: the backend's `cleanup` runs.
const RELEASE: &[Code] = &[
    Success,
    MissingField,
    InvalidType,
    SessionNotFound,
    Forbidden,
    ExecutionError,
    Timeout,
    DependencyFailure,
    Internal,
];
/// Reading or touching session rows.
const SESSION_ROWS: &[Code] = &[
    Success,
    MissingField,
    InvalidType,
    SessionNotFound,
    Forbidden,
    DependencyFailure,
    Internal,
];
/// A file moved in or out of a sandbox.
const FILES: &[Code] = &[
    Success,
    InvalidInput,
    InvalidRequest,
    MissingField,
    InvalidType,
    SessionNotFound,
    Forbidden,
    PayloadTooLarge,
    ExecutionError,
    Timeout,
    BackendUnavailable,
    DependencyFailure,
    Internal,
];

/// MCP's transport: its own refusals in Wharf's codes (a bad message, an unknown MCP
/// session or one another token opened, a failure inside the transport); 202, 405 and 406
/// have no code and are added by the builder.
const MCP: &[Code] = &[
    Success,
    InvalidRequest,
    SessionNotFound,
    Forbidden,
    Internal,
];

/// The MCP session a request belongs to, and the key of the Wharf sessions its tools use.
const MCP_POST_HEADERS: &[Param] = &[
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
const MCP_SESSION: &[Param] = &[param(
    "Mcp-Session-Id",
    true,
    "The MCP session (from `initialize`'s answer)",
)];

const FILE_PATH: &[Param] = &[param("path", true, "The file in the sandbox")];

const WORKER_QUERY: &[Param] = &[
    param("worker_id", false, "Only this worker's sessions"),
    param("resource_type", false, "Only this backend's sessions"),
];

/// Every route.
pub(super) const OPERATIONS: &[Operation] = &[
    get("/healthz", "Liveness"),
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
    delete("/v1/sessions/{id}/claim", "Release your holder claim")
        .scope(Call)
        .query(&[param("holder", true, "The holder whose claim ends")])
        .codes(SESSION_ROWS),
    get(
        "/v1/sessions/{id}/files",
        "Stream a file out of a sandbox session",
    )
    .scope(Call)
    .query(FILE_PATH)
    .reply(Reply::Octets)
    .codes(FILES),
    put(
        "/v1/sessions/{id}/files",
        "Stream a file into a sandbox session",
    )
    .scope(Call)
    .body(Body::Bytes)
    .query(FILE_PATH)
    .codes(FILES),
    post("/v1/call", "Run a tool")
        .scope(Call)
        .body(body::<CallRequest>(true))
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
        "Compatibility: run several actions (5009 when none succeeded, 5010 when some did not)",
    )
    .scope(Call)
    .body(body::<BatchBody>(true))
    .codes(&[
        Success,
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

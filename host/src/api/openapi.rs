//! `GET /openapi.json`: an OpenAPI 3.1 document of every route, built from the one table
//! below that names each operation next to the request types its handler parses (their
//! schemas come from the Rust types through schemars). A test checks the table against
//! the routes the router registers.

use crate::front_door::{CallRequest, SessionRequest};
use serde_json::{Value, json};

/// One documented operation.
struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    /// `None` (open), `read`, `call` or `admin`.
    scope: Option<&'static str>,
    body: Body,
}

enum Body {
    None,
    Json(fn() -> Value),
    Object,
    Bytes,
}

fn schema<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Bool(true))
}

const OPERATIONS: &[Operation] = &[
    Operation {
        method: "get",
        path: "/healthz",
        summary: "Liveness",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/readyz",
        summary: "Readiness: at least one backend loaded",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/metrics",
        summary: "Prometheus metrics (OpenMetrics text)",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/openapi.json",
        summary: "This document",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/v1/backends",
        summary: "Loaded backends, versions, state, tools",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/v1/quotas",
        summary: "The caller's quotas and use (admins: every tenant's)",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/v1/tools",
        summary: "Every tool with its input schema, annotations and session need",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/v1/sessions",
        summary: "Acquire the session of (token, backend, key): the same key gives the same session",
        scope: Some("call"),
        body: Body::Json(schema::<SessionRequest>),
    },
    Operation {
        method: "get",
        path: "/v1/sessions",
        summary: "Sessions of the caller (?backend=&key=)",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/v1/sessions/{id}",
        summary: "One session",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "delete",
        path: "/v1/sessions/{id}",
        summary: "Release a session (cleanup); idempotent",
        scope: Some("call"),
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/v1/sessions/{id}/refresh",
        summary: "Extend the idle TTL",
        scope: Some("call"),
        body: Body::None,
    },
    Operation {
        method: "delete",
        path: "/v1/sessions/{id}/claim",
        summary: "Release your holder claim (?holder=)",
        scope: Some("call"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/v1/sessions/{id}/files",
        summary: "Stream a file out of a sandbox session (?path=)",
        scope: Some("call"),
        body: Body::None,
    },
    Operation {
        method: "put",
        path: "/v1/sessions/{id}/files",
        summary: "Stream a file into a sandbox session (?path=)",
        scope: Some("call"),
        body: Body::Bytes,
    },
    Operation {
        method: "post",
        path: "/v1/call",
        summary: "Run a tool",
        scope: Some("call"),
        body: Body::Json(schema::<CallRequest>),
    },
    Operation {
        method: "post",
        path: "/mcp",
        summary: "MCP over streamable HTTP (JSON-RPC)",
        scope: Some("read"),
        body: Body::Object,
    },
    Operation {
        method: "get",
        path: "/mcp",
        summary: "MCP server-to-client event stream",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "delete",
        path: "/mcp",
        summary: "End an MCP session",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "put",
        path: "/v1/admin/backends/{name}",
        summary: "Load or replace a backend from a .wasm body",
        scope: Some("admin"),
        body: Body::Bytes,
    },
    Operation {
        method: "delete",
        path: "/v1/admin/backends/{name}",
        summary: "Drain and unload a backend",
        scope: Some("admin"),
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/v1/admin/backends/{name}/approve",
        summary: "Approve a pending upgrade",
        scope: Some("admin"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/health",
        summary: "Compatibility: liveness",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/ready",
        summary: "Compatibility: readiness",
        scope: None,
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/api/v1/session/create",
        summary: "Compatibility: create a worker's session",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "post",
        path: "/api/v1/session/destroy",
        summary: "Compatibility: destroy a worker's session(s)",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "post",
        path: "/api/v1/session/list",
        summary: "Compatibility: list sessions",
        scope: Some("read"),
        body: Body::Object,
    },
    Operation {
        method: "get",
        path: "/api/v1/session/list",
        summary: "Compatibility: list sessions",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/api/v1/session/refresh",
        summary: "Compatibility: refresh a worker's session(s)",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "post",
        path: "/api/v1/execute",
        summary: "Compatibility: run one action",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "post",
        path: "/api/v1/execute/batch",
        summary: "Compatibility: run several actions",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "get",
        path: "/api/v1/tools",
        summary: "Compatibility: list tools",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "get",
        path: "/api/v1/tools/{name}/schema",
        summary: "Compatibility: one tool's schema",
        scope: Some("read"),
        body: Body::None,
    },
    Operation {
        method: "post",
        path: "/api/v1/lifecycle/heartbeat",
        summary: "Compatibility: keep a worker's sessions alive",
        scope: Some("call"),
        body: Body::Object,
    },
    Operation {
        method: "post",
        path: "/api/v1/worker/disconnect",
        summary: "Compatibility: destroy a worker's sessions",
        scope: Some("call"),
        body: Body::Object,
    },
];

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// The document.
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for op in OPERATIONS {
        let mut operation = json!({
            "summary": op.summary,
            "operationId": format!("{}{}", op.method, op.path.replace(['/', '{', '}', '.', '-'], "_")),
            "parameters": path_parameters(op.path),
            "responses": {
                "200": {"description": "Success (code 0) or a code with HTTP 200 (4006)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}}}},
                "default": {"description": "A failure: one HTTP status per code (see Envelope.code)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}}}}
            }
        });
        if let Some(scope) = op.scope {
            operation["security"] = json!([{"bearer": [scope]}]);
            operation["x-wharf-scope"] = json!(scope);
        } else {
            operation["security"] = json!([]);
        }
        match op.body {
            Body::None => {}
            Body::Json(schema) => {
                operation["requestBody"] =
                    json!({"required": true, "content": {"application/json": {"schema": schema()}}})
            }
            Body::Object => {
                operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": {"type": "object"}}}})
            }
            Body::Bytes => {
                operation["requestBody"] = json!({"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}})
            }
        }
        let entry = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Wharf", "version": env!("CARGO_PKG_VERSION"), "description": "WebAssembly backends served to agents: tools, sessions, sandboxes."},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Envelope": {
                "type": "object",
                "required": ["code", "message", "data", "meta"],
                "properties": {
                    "code": {"type": "integer", "description": "0 success; 4000–4990 the caller's fault; 5000–5013 the backend's or a dependency's"},
                    "message": {"type": "string"},
                    "data": {},
                    "retryable": {"type": "boolean"},
                    "meta": {"type": "object", "properties": {
                        "tool": {"type": "string"}, "backend": {"type": "string"}, "session_id": {"type": "string"},
                        "duration_ms": {"type": "integer"}, "trace_id": {"type": "string"}
                    }}
                }
            }}
        }
    })
}

/// The documented `(method, path)` pairs.
pub fn operations() -> Vec<(&'static str, &'static str)> {
    OPERATIONS.iter().map(|o| (o.method, o.path)).collect()
}

/// The handler.
pub async fn serve() -> axum::Json<Value> {
    axum::Json(document())
}

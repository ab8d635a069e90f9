//! `GET /openapi.json`: an OpenAPI 3.1 document of the routes this host serves, as it is
//! configured (the admin routes only with an admin token, bearer security only with
//! tokens). It is built from one table ([`table`]) that names each operation next to the
//! request types its handler parses; their schemas, and the envelope's, come from the Rust
//! types through schemars. Each operation lists every HTTP status it can answer, with the
//! codes behind it. A test checks the table against the routes the router registers, and
//! `scripts/schemathesis.sh` checks a running host against the document.

mod table;

use crate::api::envelope::Envelope;
use crate::config::AuthConfig;
use crate::error_code::Code;
use crate::front_door::Wharf;
use axum::extract::State;
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use table::{Body, OPERATIONS, Operation, ParamKind, Reply};

/// A generator that puts every named schema under `#/components/schemas`.
fn generator(settings: SchemaSettings) -> SchemaGenerator {
    settings
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator()
}

fn to_value(schema: impl serde::Serialize) -> Value {
    serde_json::to_value(schema).unwrap_or(Value::Bool(true))
}

fn path_parameters(path: &str) -> impl Iterator<Item = Value> + '_ {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
}

/// Every code `op` can answer: its handler's, and the refusals its route shares with others.
fn codes(op: &Operation, tokens: bool) -> Vec<Code> {
    let mut codes = op.codes.to_vec();
    // The edge guard (Host, Origin) answers every route.
    codes.push(Code::Forbidden);
    if op.scope.is_some() && tokens {
        codes.push(Code::Unauthorized);
    }
    match op.body {
        Body::None => {}
        Body::Json { .. } | Body::JsonRpc => codes.extend([
            Code::InvalidRequest,
            Code::PayloadTooLarge,
            Code::UnsupportedMediaType,
        ]),
        Body::Bytes | Body::FileOrTar => {
            codes.extend([Code::PayloadTooLarge, Code::UnsupportedMediaType]);
        }
    }
    codes.sort_by_key(|c| c.as_u32());
    codes.dedup();
    codes
}

/// The content of an envelope answer.
fn envelope_content() -> Value {
    json!({"application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}}})
}

/// The content of a success.
fn success_content(reply: Reply) -> Value {
    match reply {
        Reply::Envelope => envelope_content(),
        Reply::EnvelopeOrLines => {
            let mut content = envelope_content();
            content["application/x-ndjson"] = json!({
                "schema": {"type": "string"},
                "description": "Sent when the request's Accept names application/x-ndjson: one JSON object per line, `{\"output\": {\"stream\": \"stdout\"|\"stderr\", \"text\": string}}` for each piece of output the call writes while it runs (a command's, through the sandbox agent), `{\"progress\": {\"progress\": number, \"total\": number|null, \"message\": string|null}}` for each progress report of the backend's (an MCP server's, through the bridge), then the call's envelope as the last line (its `code` is the call's; the HTTP status is 200 once the stream has started)."
            });
            content
        }
        Reply::Document => json!({"application/json": {"schema": {"type": "object"}}}),
        Reply::Metrics => json!({"application/openmetrics-text": {"schema": {"type": "string"}}}),
        Reply::FileOrTar => json!({
            "application/octet-stream": {"schema": {}, "description": "A file's bytes, with its Content-Length"},
            "application/x-tar": {"schema": {}, "description": "When `path` is a directory (and the sandbox runs the agent): its contents as a tar stream, names relative to it, symlinks kept as links"}
        }),
        Reply::Lines => json!({"application/x-ndjson": {
            "schema": {"type": "string"},
            "description": "One JSON object per line: `{\"event\": \"create\"|\"modify\"|\"delete\"|\"overflow\", \"path\": string (relative to the watched path), \"directory\": boolean}`, and `{\"event\": \"error\", \"message\": string}` as the last line when the sandbox went away. The stream ends when timeout_seconds pass."
        }}),
        Reply::Mcp => json!({
            "application/json": {"schema": {"$ref": "#/components/schemas/JsonRpcMessage"}},
            "text/event-stream": {"schema": {"type": "string"}}
        }),
        // Never a 200: the success is the upgrade (101, below).
        Reply::WebSocket => envelope_content(),
    }
}

/// The `responses` of `op`: one per HTTP status, naming the codes behind it.
fn responses(op: &Operation, tokens: bool, replies: &mut SchemaGenerator) -> Value {
    let mut by_status: BTreeMap<u16, Vec<Code>> = BTreeMap::new();
    for code in codes(op, tokens) {
        by_status.entry(code.http_status()).or_default().push(code);
    }
    let mut responses = Map::new();
    for (status, codes) in by_status {
        let list: Vec<String> = codes
            .iter()
            .map(|c| format!("{} {}", c.as_u32(), c.summary()))
            .collect();
        let content = match (status, op.data) {
            // Only a success answers 200 here: its `data` is the handler's reply type.
            (200, Some(data)) if codes == [Code::Success] => {
                json!({"application/json": {"schema": {
                    "allOf": [{"$ref": "#/components/schemas/Envelope"}],
                    "properties": {"data": to_value(data(replies))}
                }}})
            }
            (200, _) if codes.contains(&Code::Success) => success_content(op.reply),
            _ => envelope_content(),
        };
        let mut response = json!({"description": list.join("; "), "content": content});
        if status == 429 || status == 503 {
            response["headers"] = json!({"Retry-After": {
                "description": "Seconds until a retry can help",
                "schema": {"type": "integer", "minimum": 1}
            }});
        }
        responses.insert(status.to_string(), response);
    }
    if op.reply == Reply::Mcp {
        mcp_transport_answers(&mut responses);
    }
    if op.reply == Reply::WebSocket {
        responses.remove("200");
        responses.insert(
            "101".into(),
            json!({"description": "Switching Protocols: the WebSocket of the terminal"}),
        );
    }
    Value::Object(responses)
}

/// What MCP's streamable-HTTP transport answers beyond the code table: 202 for a
/// notification or a response it took, 405 and 406 in plain text; a 400 may be a
/// JSON-RPC error of the transport's.
fn mcp_transport_answers(responses: &mut Map<String, Value>) {
    responses.insert(
        "202".into(),
        json!({"description": "A notification or response accepted"}),
    );
    let text = json!({"text/plain": {"schema": {"type": "string"}}});
    responses.insert(
        "405".into(),
        json!({"description": "A method the transport does not serve here", "content": text}),
    );
    responses.insert(
        "406".into(),
        json!({"description": "The client must accept application/json and text/event-stream", "content": text}),
    );
    if let Some(content) = responses
        .get_mut("400")
        .and_then(|r| r.pointer_mut("/content/application~1json/schema"))
    {
        *content = json!({"anyOf": [
            {"$ref": "#/components/schemas/Envelope"},
            {"$ref": "#/components/schemas/JsonRpcMessage"}
        ]});
    }
}

fn operation(
    op: &Operation,
    auth: &AuthConfig,
    requests: &mut SchemaGenerator,
    replies: &mut SchemaGenerator,
) -> Value {
    let tokens = !auth.is_open();
    let mut parameters: Vec<Value> = path_parameters(op.path).collect();
    for (location, params) in [("query", op.query), ("header", op.headers)] {
        parameters.extend(params.iter().map(|p| {
            let schema = match p.kind {
                ParamKind::Text => json!({"type": "string"}),
                ParamKind::TextUpTo(most) => json!({"type": "string", "maxLength": most}),
                ParamKind::Integer { min, max } => {
                    json!({"type": "integer", "minimum": min, "maximum": max})
                }
            };
            json!({"name": p.name, "in": location, "required": p.required,
                   "description": p.description, "schema": schema})
        }));
    }
    let mut operation = json!({
        "summary": op.summary,
        "operationId": format!("{}{}", op.method, op.path.replace(['/', '{', '}', '.', '-'], "_")),
        "parameters": parameters,
        "responses": responses(op, tokens, replies),
    });
    match (op.scope, tokens) {
        (Some(scope), true) => {
            operation["security"] = json!([{"bearer": [scope.as_str()]}]);
            operation["x-wharf-scope"] = json!(scope.as_str());
        }
        _ => operation["security"] = json!([]),
    }
    match op.body {
        Body::None => {}
        Body::Json { schema, required } => {
            operation["requestBody"] = json!({"required": required, "content": {
                "application/json": {"schema": to_value(schema(requests))}
            }});
        }
        Body::Bytes => {
            operation["requestBody"] = json!({"required": true, "content": {
                "application/octet-stream": {"schema": {}}
            }});
        }
        Body::FileOrTar => {
            operation["requestBody"] = json!({"required": true, "content": {
                "application/octet-stream": {"schema": {}},
                "application/x-tar": {"schema": {}, "description": "A tar stream unpacked into the directory `path` (made when missing); an entry that would land outside it is refused with 4000"}
            }});
        }
        Body::JsonRpc => {
            operation["requestBody"] = json!({"required": true, "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/JsonRpcMessage"}}
            }});
        }
    }
    operation
}

/// A JSON-RPC 2.0 message as MCP's transport takes it: a request, a notification, or a
/// response (a result or an error) to a request of the server's.
fn json_rpc_message() -> Value {
    let id = json!({"type": ["integer", "string"]});
    let message = |required: &[&str], extra: Value| {
        let mut properties = json!({"jsonrpc": {"const": "2.0"}, "id": id.clone()});
        if let (Some(p), Value::Object(extra)) = (properties.as_object_mut(), extra) {
            p.extend(extra);
        }
        json!({"type": "object", "required": required, "properties": properties})
    };
    let method = json!({"method": {"type": "string"}, "params": {"type": "object"}});
    let mut notification = message(&["jsonrpc", "method"], method.clone());
    notification["not"] = json!({"required": ["id"]});
    json!({
        "description": "A JSON-RPC 2.0 message of MCP: a request, a notification, or a response",
        "oneOf": [
            message(&["jsonrpc", "id", "method"], method),
            notification,
            message(&["jsonrpc", "id", "result"], json!({"result": {"type": "object"}})),
            message(&["jsonrpc", "id", "error"], json!({"error": {
                "type": "object", "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}
            }})),
        ]
    })
}

/// The document for a host configured with `auth`.
pub fn document(auth: &AuthConfig) -> Value {
    let mut requests = generator(SchemaSettings::draft2020_12().for_deserialize());
    let mut replies = generator(SchemaSettings::draft2020_12().for_serialize());
    let admin = auth.admin_enabled();
    let mut paths = Map::new();
    for op in OPERATIONS {
        if op.scope == Some(crate::config::TokenScope::Admin) && !admin
            || op.oauth_only && auth.oauth.is_none()
        {
            continue;
        }
        let entry = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        entry[op.method] = operation(op, auth, &mut requests, &mut replies);
    }
    // The metadata of a resource with a path is also served under that path (RFC 9728).
    if let Some(oauth) = &auth.oauth
        && let [root, under_path] = oauth.metadata_paths().as_slice()
        && let Some(entry) = paths.get(root).cloned()
    {
        paths.insert(under_path.clone(), entry);
    }
    // Named, so it lands in the definitions that `envelope_content` refers to.
    replies.subschema_for::<Envelope>();
    let mut schemas = requests.take_definitions(true);
    schemas.extend(replies.take_definitions(true));
    schemas.insert("JsonRpcMessage".into(), json_rpc_message());
    let mut components = json!({"schemas": schemas});
    if !auth.is_open() {
        components["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer",
            "description": "A static token (`[[auth.tokens]]`) or, with `[auth.oauth]`, an access token (RFC 9068 JWT) from an authorization server named by GET /.well-known/oauth-protected-resource (RFC 9728)"}});
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Wharf", "version": env!("CARGO_PKG_VERSION"), "description": "WebAssembly backends served to agents: tools, sessions, sandboxes. Every answer is the envelope {code, message, data, meta} with one HTTP status per code (ARCHITECTURE.md has the table); a response's description lists the codes behind its status."},
        "paths": paths,
        "components": components,
    })
}

/// The documented `(method, path)` pairs, the admin routes included.
pub fn operations() -> Vec<(&'static str, &'static str)> {
    OPERATIONS
        .iter()
        .filter(|o| !o.oauth_only)
        .map(|o| (o.method, o.path))
        .collect()
}

/// The handler.
pub async fn serve(State(wharf): State<Arc<Wharf>>) -> axum::Json<Value> {
    axum::Json(document(&wharf.server().auth))
}

//! `GET /api/v1/tools` and `GET /api/v1/tools/{name}/schema` of the compatibility API.
//!
//! Each tool: `name` (`backend:action`), `backend` (also as `resource_type`), `action`,
//! `description`, `input_schema` (also as `parameters`), `output_schema`, `annotations`,
//! `session` (the need: `none`, `optional` or `required`; every tool of a sandbox provider
//! runs in a session) and `requires_session`. The replaced server answered these two routes
//! without its envelope, so besides the envelope's `data` the list's `tools` and `count`,
//! and the schema's fields, are repeated at the top level of the reply, where its Python
//! client reads them. The `include_hidden` query of the client is accepted and ignored
//! (Wharf has no hidden tools).

use super::mirrored;
use crate::api::auth::Caller;
use crate::api::route_answer::{PathRoute, answer};
use crate::config::TokenScope;
use crate::front_door::Wharf;
use crate::tool::{SessionNeed, ToolDescription};
use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// Fields of a tool repeated at the top level of a schema reply.
const SCHEMA_FIELDS: &[&str] = &[
    "name",
    "backend",
    "resource_type",
    "action",
    "description",
    "input_schema",
    "parameters",
    "output_schema",
    "annotations",
    "session",
    "requires_session",
];

fn tool_json(backend: &str, version: &str, tool: &ToolDescription) -> Value {
    let need = tool.session;
    json!({
        "name": format!("{backend}:{}", tool.action),
        "backend": backend,
        "resource_type": backend,
        "action": tool.action,
        "version": version,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "parameters": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations,
        "session": need,
        "requires_session": need == SessionNeed::Required,
    })
}

/// `GET /api/v1/tools`: every tool the caller may use.
pub(super) async fn list(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Response {
    let envelope = answer(&caller, TokenScope::Read, async {
        let tools: Vec<Value> = wharf
            .tools()
            .into_iter()
            .filter(|(name, _, _)| caller.may_use(&name.backend, Some(&name.action)))
            .map(|(name, version, tool)| tool_json(&name.backend, &version, &tool))
            .collect();
        Ok(json!({ "count": tools.len(), "tools": tools }))
    })
    .await;
    mirrored(envelope, &["tools", "count"])
}

/// `GET /api/v1/tools/{name}/schema`: one tool, by any of its names (4002 when unknown).
pub(super) async fn schema(r: PathRoute) -> Response {
    let mut envelope = r
        .answer(TokenScope::Read, async {
            let found = r.wharf.find_tool(&r.id)?;
            r.caller.require_tool(&found.backend, Some(&found.action))?;
            Ok(tool_json(&found.backend, &found.version, &found.tool))
        })
        .await;
    envelope.meta.tool = envelope.data_text("name");
    mirrored(envelope, SCHEMA_FIELDS)
}

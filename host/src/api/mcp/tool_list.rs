//! `tools/list` as the MCP revisions describe it: each tool with its `title`, `inputSchema`,
//! `outputSchema` (when the backend promised one) and hints, in a deterministic order (by
//! MCP name), in pages of `[server.connections] mcp_tools_page_size` with an opaque cursor.
//!
//! The cursor names the last tool of the page it ends; the next page is the tools whose
//! names sort after it. A backend loaded or unloaded between two pages therefore neither
//! repeats nor skips a tool that stayed (a new one that sorts before the cursor shows on the
//! next full listing, announced by `list_changed`).
//!
//! Each page carries the 2026-07-28 revision's caching hints: `cacheScope: private` (the list
//! is filtered by the caller's allowlist, so no intermediary may serve it to another user)
//! and a `ttlMs` of [`LIST_TTL_MS`]; a client that listens hears of a change at once.
//!
//! MCP's `outputSchema` and `structuredContent` are objects. A tool whose result schema is
//! an object is listed with it as is; one whose schema has another `type` (an array, a
//! number …) is listed with the schema wrapped as `{"result": …}`, and its results are
//! wrapped the same way ([`structured`]); a schema without a `type` promises no shape MCP
//! can state, so none is listed.

use crate::tool::ToolDescription;
use crate::tool_names::ToolName;
use base64::Engine;
use rmcp::model::{CacheScope, JsonObject, ListToolsResult, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;

/// How long a client may treat a page of tools as fresh: tools change when backends load
/// or unload, or when a backend that lists its tools at run time lists others.
pub const LIST_TTL_MS: u64 = 60_000;

/// The key a non-object result is wrapped under in `structuredContent`.
pub const WRAPPED_RESULT: &str = "result";

/// A tool as MCP lists it.
pub fn mcp_tool(name: &ToolName, tool: &ToolDescription) -> Tool {
    let schema: JsonObject = match &tool.input_schema {
        Value::Object(map) => map.clone(),
        _ => JsonObject::from_iter([("type".to_string(), Value::from("object"))]),
    };
    let hints = tool.annotations;
    let mut listed = Tool::new_with_raw(
        name.mcp_name(),
        Some(Cow::Owned(tool.description.clone())),
        Arc::new(schema),
    )
    .with_annotations(ToolAnnotations::from_raw(
        None,
        Some(hints.read_only),
        Some(hints.destructive),
        Some(hints.idempotent),
        Some(hints.open_world),
    ));
    listed.title = Some(title(name));
    listed.output_schema = tool
        .output_schema
        .as_ref()
        .and_then(output_schema)
        .map(Arc::new);
    listed
}

/// `scratchpad`'s `add_note` → `Add note (scratchpad)`.
fn title(name: &ToolName) -> String {
    let words = name.action.replace(['_', '-', '.'], " ");
    let mut chars = words.trim().chars();
    let action = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
        None => name.action.clone(),
    };
    format!("{action} ({})", name.backend)
}

/// The `outputSchema` MCP lists for a tool's result schema (see the module doc).
fn output_schema(schema: &Value) -> Option<JsonObject> {
    let object = schema.as_object()?;
    match object.get("type").and_then(Value::as_str) {
        Some("object") => Some(object.clone()),
        Some(_) => match json!({
            "type": "object",
            "properties": { WRAPPED_RESULT: schema },
            "required": [WRAPPED_RESULT],
        }) {
            Value::Object(wrapped) => Some(wrapped),
            _ => None,
        },
        None => None,
    }
}

/// A call's result as `structuredContent`: an object as is, anything else wrapped.
pub fn structured(result: Value) -> Value {
    match result {
        Value::Object(_) => result,
        other => json!({ WRAPPED_RESULT: other }),
    }
}

/// Why a cursor was refused.
#[derive(Debug)]
pub struct BadCursor;

/// One page of `tools` (already filtered for the caller), sorted by MCP name, starting
/// after `cursor`, at most `page_size` long.
pub fn page(
    tools: impl IntoIterator<Item = (ToolName, ToolDescription)>,
    cursor: Option<&str>,
    page_size: usize,
) -> Result<ListToolsResult, BadCursor> {
    let after = cursor.map(decode).transpose()?;
    let mut named: Vec<(String, ToolName, ToolDescription)> = tools
        .into_iter()
        .map(|(name, tool)| (name.mcp_name(), name, tool))
        .filter(|(mcp, _, _)| after.as_deref().is_none_or(|after| mcp.as_str() > after))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let page_size = page_size.max(1);
    let next_cursor = (named.len() > page_size).then(|| encode(&named[page_size - 1].0));
    named.truncate(page_size);
    Ok(ListToolsResult {
        tools: named
            .iter()
            .map(|(_, name, tool)| mcp_tool(name, tool))
            .collect(),
        next_cursor,
        ttl_ms: Some(LIST_TTL_MS),
        cache_scope: Some(CacheScope::Private),
        ..Default::default()
    })
}

fn encode(name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(name)
}

/// A cursor is the base64 of an MCP name (at most 64 characters); anything else is refused.
fn decode(cursor: &str) -> Result<String, BadCursor> {
    if cursor.len() > 128 {
        return Err(BadCursor);
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| BadCursor)?;
    String::from_utf8(bytes).map_err(|_| BadCursor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{SessionNeed, ToolAnnotations as Hints};

    fn tool(action: &str, output: Option<Value>) -> (ToolName, ToolDescription) {
        (
            ToolName {
                backend: "b".into(),
                action: action.into(),
            },
            ToolDescription {
                action: action.into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
                output_schema: output,
                session: SessionNeed::None,
                annotations: Hints::default(),
            },
        )
    }

    fn names(r: &ListToolsResult) -> Vec<String> {
        r.tools.iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn pages_follow_the_cursor_across_a_load_between_them() {
        let all: Vec<_> = ["d", "a", "c", "b", "e"]
            .iter()
            .map(|a| tool(a, None))
            .collect();
        let first = page(all.clone(), None, 2).unwrap();
        assert_eq!(names(&first), ["b_a", "b_b"]);
        let cursor = first.next_cursor.clone().unwrap();
        // A tool that sorts before the cursor appears, one after it goes: nothing that
        // stayed is repeated or skipped.
        let mut changed: Vec<_> = all.into_iter().filter(|(n, _)| n.action != "d").collect();
        changed.push(tool("aa", None));
        let second = page(changed.clone(), Some(&cursor), 2).unwrap();
        assert_eq!(names(&second), ["b_c", "b_e"]);
        assert_eq!(second.cache_scope, Some(CacheScope::Private));
        assert_eq!(second.ttl_ms, Some(LIST_TTL_MS));
        assert_eq!(second.next_cursor, None);
        assert!(page(changed.clone(), Some("not base64!"), 2).is_err());
        assert!(page(changed, Some(&"A".repeat(200)), 2).is_err());
    }

    #[test]
    fn output_schemas_are_objects_and_results_match_them() {
        let object = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let (name, t) = tool("o", Some(object.clone()));
        let listed = mcp_tool(&name, &t);
        assert_eq!(
            Value::Object((*listed.output_schema.unwrap()).clone()),
            object
        );
        assert_eq!(listed.title.as_deref(), Some("O (b)"));
        let (name, t) = tool("list_all", Some(json!({"type": "array"})));
        let listed = mcp_tool(&name, &t);
        let wrapped = listed.output_schema.unwrap();
        assert_eq!(wrapped["required"], json!(["result"]));
        assert_eq!(listed.title.as_deref(), Some("List all (b)"));
        assert_eq!(structured(json!([1])), json!({"result": [1]}));
        assert_eq!(structured(json!({"n": 1})), json!({"n": 1}));
        let (name, t) = tool("any", Some(json!({"anyOf": []})));
        assert!(mcp_tool(&name, &t).output_schema.is_none());
    }
}

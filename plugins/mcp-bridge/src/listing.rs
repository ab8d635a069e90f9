//! The server's `tools/list`, page by page within bounds, as Wharf [`ToolSpec`]s. Names
//! and schemas pass through as the server gives them: the host filters hostile names and
//! oversized schemas itself.

use wharf_sdk::{Annotations, SessionNeed, ToolError, ToolSpec, Value, json};

/// The most `tools/list` pages followed.
pub const MAX_PAGES: usize = 16;
/// The most tools kept.
pub const MAX_TOOLS: usize = 1024;

/// The tools listed, and whether a bound cut the list short.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The tools, in the server's order.
    pub tools: Vec<ToolSpec>,
    /// Whether pages or tools were left unread.
    pub truncated: bool,
}

/// Lists every tool, asking `page(cursor)` for each `tools/list` result.
pub fn list_all(
    page: &mut dyn FnMut(Option<&str>) -> Result<Value, ToolError>,
) -> Result<Listing, ToolError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let result = page(cursor.as_deref())?;
        let Some(items) = result.get("tools").and_then(Value::as_array) else {
            return Err(ToolError::execution(
                "the MCP server's tools/list result has no `tools` array",
            ));
        };
        for item in items {
            if tools.len() == MAX_TOOLS {
                return Ok(Listing {
                    tools,
                    truncated: true,
                });
            }
            if let Some(spec) = tool_spec(item) {
                tools.push(spec);
            }
        }
        cursor = match result.get("nextCursor") {
            Some(Value::String(next)) if !next.is_empty() => Some(next.clone()),
            _ => {
                return Ok(Listing {
                    tools,
                    truncated: false,
                });
            }
        };
    }
    Ok(Listing {
        tools,
        truncated: true,
    })
}

/// A non-empty string value.
fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn hint(annotations: Option<&Value>, key: &str, default: bool) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(default)
}

/// One MCP tool as a [`ToolSpec`]; `None` when it has no string `name`.
pub fn tool_spec(item: &Value) -> Option<ToolSpec> {
    let name = item.get("name")?.as_str()?.to_string();
    let annotations = item.get("annotations").filter(|a| a.is_object());
    let description = text(item.get("description"))
        .or_else(|| text(item.get("title")))
        .or_else(|| text(annotations.and_then(|a| a.get("title"))))
        .unwrap_or("")
        .to_string();
    let input_schema = item
        .get("inputSchema")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
    let output_schema = item.get("outputSchema").filter(|s| s.is_object()).cloned();
    Some(ToolSpec {
        name,
        description,
        input_schema,
        output_schema,
        session: SessionNeed::None,
        annotations: Annotations {
            read_only: hint(annotations, "readOnlyHint", false),
            destructive: hint(annotations, "destructiveHint", true),
            idempotent: hint(annotations, "idempotentHint", false),
            open_world: hint(annotations, "openWorldHint", true),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_with_everything_and_one_with_nothing() {
        let full = tool_spec(&json!({
            "name": "add", "title": "Add", "description": "Adds.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "destructiveHint": false,
                            "idempotentHint": true, "openWorldHint": false}
        }))
        .unwrap();
        assert_eq!(full.description, "Adds.");
        assert_eq!(full.input_schema["properties"]["a"]["type"], "integer");
        assert_eq!(full.output_schema, Some(json!({"type": "object"})));
        assert!(full.annotations.read_only && full.annotations.idempotent);
        assert!(!full.annotations.destructive && !full.annotations.open_world);

        let bare = tool_spec(&json!({"name": "../../etc", "title": "T"})).unwrap();
        assert_eq!(bare.name, "../../etc");
        assert_eq!(bare.description, "T");
        assert_eq!(bare.input_schema, json!({"type": "object"}));
        assert_eq!(bare.output_schema, None);
        assert_eq!(bare.session, SessionNeed::None);
        assert!(bare.annotations.destructive && bare.annotations.open_world);
        assert!(!bare.annotations.read_only && !bare.annotations.idempotent);
        assert_eq!(tool_spec(&json!({"name": 3})), None);
        assert_eq!(tool_spec(&json!({})).map(|t| t.name), None);
    }

    #[test]
    fn pages_are_followed() {
        let mut asked = Vec::new();
        let listing = list_all(&mut |cursor| {
            asked.push(cursor.map(str::to_string));
            Ok(match cursor {
                None => json!({"tools": [{"name": "a"}], "nextCursor": "p2"}),
                Some(_) => json!({"tools": [{"name": "b"}, {"bad": 1}]}),
            })
        })
        .unwrap();
        assert_eq!(asked, vec![None, Some("p2".to_string())]);
        let names: Vec<_> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(!listing.truncated);
    }

    #[test]
    fn endless_pages_stop_at_the_bounds() {
        let mut pages = 0;
        let listing = list_all(&mut |_| {
            pages += 1;
            let tools: Vec<_> = (0..100)
                .map(|i| json!({"name": format!("t{pages}_{i}")}))
                .collect();
            Ok(json!({"tools": tools, "nextCursor": "more"}))
        })
        .unwrap();
        assert!(listing.truncated);
        assert_eq!(listing.tools.len(), MAX_TOOLS);
        assert_eq!(pages, 11);
        let mut pages = 0;
        let listing = list_all(&mut |_| {
            pages += 1;
            Ok(json!({"tools": [{"name": "same"}], "nextCursor": "loop"}))
        })
        .unwrap();
        assert!(listing.truncated);
        assert_eq!(pages, MAX_PAGES);
        assert!(list_all(&mut |_| Ok(json!({"nope": []}))).is_err());
    }
}

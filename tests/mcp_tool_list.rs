//! `tools/list` as the MCP revisions describe it, against a real host: pages of
//! `mcp_tools_page_size` in name order that neither repeat nor skip a tool when a backend is
//! hot-loaded between pages, a refused cursor, each tool's `title`, and an `outputSchema`
//! that the call's `structuredContent` validates against.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use wharf_integration_tests::raw_mcp::RawMcpSession;
use wharf_integration_tests::{bundled, start_with};

/// One JSON-RPC answer, whether it came as a JSON body or as an event stream.
async fn rpc(s: &RawMcpSession, body: Value) -> Value {
    let text = s.post(&body).await.text().await.expect("body");
    let json = if text.trim_start().starts_with('{') {
        text
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no message in {text}"))
            .to_string()
    };
    serde_json::from_str(&json).unwrap_or_else(|_| panic!("not JSON: {json}"))
}

async fn list(s: &RawMcpSession, id: u64, cursor: Option<&str>) -> Value {
    let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
    rpc(
        s,
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_come_in_pages_with_titles_and_output_schemas() {
    let h = start_with(
        vec![("echo", bundled("echo")), ("pad", bundled("scratchpad"))],
        |s| s.connections.mcp_tools_page_size = 2,
    )
    .await;
    let before: BTreeSet<String> = h.get("/v1/tools").await.body["data"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").replace(':', "_"))
        .collect();
    assert!(before.len() > 2, "enough tools for two pages: {before:?}");
    let s = RawMcpSession::open(&format!("{}/mcp", h.url)).await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut tools = Vec::new();
    for page in 0.. {
        let reply = list(&s, 10 + page, cursor.as_deref()).await;
        let result = &reply["result"];
        let names: Vec<String> = result["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"))
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect();
        assert!(names.len() <= 2, "{reply}");
        tools.extend(result["tools"].as_array().into_iter().flatten().cloned());
        seen.extend(names);
        if page == 0 {
            // A backend loaded between two pages.
            h.wharf
                .load_backend("aaa-late", bundled("echo"))
                .await
                .expect("hot load");
        }
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a tool was repeated: {seen:?}");
    assert!(
        before.is_subset(&unique),
        "a tool that stayed was skipped: {before:?} vs {seen:?}"
    );
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "not in name order");

    // A cursor this server never gave.
    let refused = list(&s, 99, Some("!!not-a-cursor!!")).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // Titles, and an output schema the call's structured content validates against.
    assert!(tools.iter().all(|t| t["title"].is_string()), "{tools:?}");
    let say = tools
        .iter()
        .find(|t| t["name"] == "echo_say")
        .expect("echo_say listed");
    assert_eq!(say["title"], "Say (echo)");
    let schema = say["outputSchema"].clone();
    assert_eq!(schema["type"], "object", "{say}");
    let (status, _, body) = s
        .call(50, "echo_say", json!({"text": "hi", "times": 2}), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).expect("JSON");
    let structured = &reply["result"]["structuredContent"];
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    assert!(
        validator.is_valid(structured),
        "{structured} does not match {schema}"
    );
}

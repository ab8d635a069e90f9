//! The Python example over MCP (the rmcp client): schema, validation, coded errors, sessions
//! by key, attachments.

use super::*;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceExt, model::CallToolResult};

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mcp() {
    let (h, _data) = host(None).await;
    let headers = std::collections::HashMap::from([(
        reqwest::header::HeaderName::from_static("x-wharf-session-key"),
        reqwest::header::HeaderValue::from_static("mcp-agent"),
    )]);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url))
        .custom_headers(headers);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("MCP client connects");
    let call = |tool: &str, args: Value| {
        CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().cloned().unwrap_or_default())
    };

    let tools = client.list_all_tools().await.expect("tools/list");
    let search = tools
        .iter()
        .find(|t| t.name == "workbench_search")
        .expect("workbench_search");
    let schema = Value::Object((*search.input_schema).clone());
    assert_eq!(schema["required"], json!(["query"]), "{schema}");
    assert_eq!(
        search.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );

    let r = client
        .call_tool(call("workbench_search", json!({"query": "python"})))
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert!(text(&r).contains("componentize-py"), "{}", text(&r));

    let r = client
        .call_tool(call("workbench_search", json!({})))
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).starts_with("4003: "), "{}", text(&r));
    let r = client
        .call_tool(call("workbench_search", json!({"query": 7})))
        .await
        .expect("call");
    assert!(text(&r).starts_with("4004: "), "{}", text(&r));

    let r = client
        .call_tool(call("workbench_divide", json!({"a": 3, "b": 0})))
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text(&r), "5000: division by zero");

    // Session tools: the key's session keeps the notes between calls.
    for note in ["first", "second"] {
        let r = client
            .call_tool(call("workbench_add_note", json!({"text": note})))
            .await
            .expect("call");
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    let r = client
        .call_tool(call("workbench_list_notes", json!({})))
        .await
        .expect("call");
    let notes = r.structured_content.clone().unwrap_or_default()["notes"].clone();
    assert_eq!(notes.as_array().map(Vec::len), Some(2), "{r:?}");
    assert_eq!(
        r.structured_content.unwrap_or_default()["owner"],
        "mcp-agent"
    );

    let r = client
        .call_tool(call("workbench_export_notes", json!({})))
        .await
        .expect("call");
    assert!(
        r.content.iter().any(|c| c.as_text().is_none()),
        "the attachment is a resource: {r:?}"
    );
    client.cancel().await.expect("close");
}

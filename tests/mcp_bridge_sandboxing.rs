//! The bridge's stdio servers in containers made like a session's sandbox (the `sandboxing`
//! import of contract 0.3.0), and a bridged server's progress passed through, against a
//! real host, real Docker and the official MCP Python SDK's demo server:
//! - `allow_egress_to` lets the server reach the names listed through the host's egress
//!   proxy and nothing else (no network of its own, another name refused); `user` runs it
//!   as that user; an allowlist past `grants.egress_to` makes no container at all.
//! - `notifications/progress` of a bridged server's tool reach a connected MCP client (over
//!   stdio) and a streaming REST caller (over HTTP), numbers growing, messages kept.
//! - An MCP client that cancels a bridged call has the server told
//!   (`notifications/cancelled`), over stdio and over HTTP: the server's own task is
//!   cancelled, not left running; a remote server is told too when the bridge's own
//!   deadline passes.

use futures::StreamExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};
use std::time::Duration;
use wharf_integration_tests::egress_destination::destination;
use wharf_integration_tests::mcp_servers::{
    ContainersCleanup, McpServer, bridge, docker_and_mcp_image, mcp_client, stdio_bridge,
};
use wharf_integration_tests::{
    TestHost, containers_labelled, docker_bridge_gateway, eventually, start, start_with,
};

const DEMO: &[&str] = &["/usr/bin/python3", "/srv/demo_server.py", "--stdio"];

fn said(r: &wharf_integration_tests::Reply) -> String {
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["result"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_reaches_only_the_names_its_egress_allowlist_gives_it() {
    if !docker_and_mcp_image().await {
        return;
    }
    let (_a, _b) = (
        ContainersCleanup("stdio-egress"),
        ContainersCleanup("stdio-egress-wide"),
    );
    let port = destination().await;
    let mut config = stdio_bridge(
        DEMO,
        "allow_egress_to = [\"allowed.test\"]\nallow_egress_to_cidrs = [\"127.0.0.1/32\"]\nuser = \"sandbox\"",
    );
    config.grants.egress_to = vec!["*.test".into()];
    config.grants.egress_cidrs = vec!["127.0.0.1/32".into()];
    let h = start_with(vec![("stdio-egress", config)], |s| {
        for name in ["allowed.test", "other.test"] {
            s.egress_resolve
                .insert(name.into(), vec!["127.0.0.1".parse().unwrap()]);
        }
    })
    .await;

    let r = h
        .call(
            "stdio-egress:fetch",
            json!({"url": format!("http://allowed.test:{port}/")}),
        )
        .await;
    let answer = said(&r);
    assert!(answer.contains("200 hello-egress"), "{answer}");
    // Another name, even one the proxy resolves and the grants cover, is not on the list.
    let r = h
        .call(
            "stdio-egress:fetch",
            json!({"url": format!("http://other.test:{port}/")}),
        )
        .await;
    let answer = said(&r);
    assert!(!answer.contains("hello-egress"), "{answer}");
    // Around the proxy: the container has no network of its own.
    let r = h
        .call(
            "stdio-egress:reach",
            json!({"host": docker_bridge_gateway(), "port": port}),
        )
        .await;
    let answer = said(&r);
    assert!(answer.contains("refused"), "{answer}");
    let r = h.call("stdio-egress:uid", json!({})).await;
    assert_eq!(r.body["data"]["result"]["result"], 1000, "{}", r.body);
    assert_eq!(
        containers_labelled("wharf.backend", "stdio-egress").len(),
        1
    );

    // An allowlist past the operator's grants: no container, no tool.
    let mut wide = stdio_bridge(DEMO, "allow_egress_to = [\"pypi.org\"]");
    wide.grants.egress_to = vec!["*.test".into()];
    h.wharf
        .load_backend("stdio-egress-wide", wide)
        .await
        .unwrap();
    assert!(h.tool_names("stdio-egress-wide").await.is_empty());
    assert!(containers_labelled("wharf.backend", "stdio-egress-wide").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_servers_progress_reaches_mcp_clients_and_streaming_rest_callers() {
    if !docker_and_mcp_image().await {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-steps");
    let remote = McpServer::demo().await;
    let h = start(vec![
        ("stdio-steps", stdio_bridge(DEMO, "")),
        ("http-steps", bridge(&remote)),
    ])
    .await;

    // Over stdio, to an MCP client that sent a progress token.
    let (client, heard) = mcp_client(&h).await;
    let params = CallToolRequestParams::new("stdio-steps_steps")
        .with_arguments(json!({"count": 3}).as_object().cloned().unwrap());
    let reply = client.call_tool(params).await.unwrap();
    assert_ne!(reply.is_error, Some(true), "{reply:?}");
    let notes = heard.progress.lock().unwrap().clone();
    let messages: Vec<_> = notes.iter().filter_map(|n| n.message.clone()).collect();
    for i in 1..=3 {
        assert!(messages.contains(&format!("step {i} of 3")), "{messages:?}");
    }
    let values: Vec<f64> = notes.iter().map(|n| n.progress).collect();
    assert!(values.windows(2).all(|w| w[1] > w[0]), "{values:?}");
    let last = notes.last().unwrap();
    assert_eq!(Some(last.progress), last.total, "{notes:?}");
    client.cancel().await.unwrap();

    // Over HTTP, to a REST caller that streams the call.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/call", h.url))
        .header("accept", "application/x-ndjson")
        .json(&json!({"tool": "http-steps:steps", "args": {"count": 3}}))
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), body.next())
        .await
        .expect("the stream ends")
    {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let progress: Vec<&Value> = lines.iter().filter_map(|l| l.get("progress")).collect();
    assert_eq!(progress.len(), 3, "{text}");
    assert_eq!(progress[2]["progress"], 3.0, "{text}");
    assert_eq!(progress[2]["total"], 3.0, "{text}");
    assert_eq!(progress[0]["message"], "step 1 of 3", "{text}");
    assert_eq!(lines.last().unwrap()["code"], 0, "{text}");
}

/// Starts `backend`'s `wait_to_be_cancelled` from an MCP client, cancels it once the server
/// has it, and waits for the server to count the cancel.
async fn cancel_and_see_it_counted(h: &TestHost, backend: &str) {
    let (client, _heard) = mcp_client(h).await;
    let params = CallToolRequestParams::new(format!("{backend}_wait_to_be_cancelled"))
        .with_arguments(json!({"seconds": 25}).as_object().cloned().unwrap());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let waiting = client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    // Long enough for the request to reach the server, which then sleeps.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    waiting
        .cancel(Some("the test gave up".into()))
        .await
        .unwrap();
    eventually(10, "the server was not told of the cancel", async || {
        let r = h
            .call(&format!("{backend}:cancelled_calls"), json!({}))
            .await;
        r.code() == 0 && r.body["data"]["result"]["result"] == 1
    })
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_that_cancels_a_bridged_call_has_the_server_told() {
    if !docker_and_mcp_image().await {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-cancel");
    let remote = McpServer::demo().await;
    let h = start(vec![
        ("stdio-cancel", stdio_bridge(DEMO, "")),
        ("http-cancel", bridge(&remote)),
    ])
    .await;
    cancel_and_see_it_counted(&h, "stdio-cancel").await;
    cancel_and_see_it_counted(&h, "http-cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_is_told_when_the_bridge_stops_waiting() {
    let remote = McpServer::demo().await;
    let mut config = bridge(&remote);
    if let Some(toml::Value::Table(table)) = config.config.as_mut() {
        table.insert("timeout_ms".into(), toml::Value::Integer(1500));
    }
    let h = start(vec![("http-deadline", config)]).await;
    let r = h
        .call("http-deadline:wait_to_be_cancelled", json!({"seconds": 25}))
        .await;
    assert_eq!(r.code(), 5006, "{}", r.body);
    eventually(
        10,
        "the server was not told the bridge stopped waiting",
        async || {
            let r = h.call("http-deadline:cancelled_calls", json!({})).await;
            r.code() == 0 && r.body["data"]["result"]["result"] == 1
        },
    )
    .await;
}

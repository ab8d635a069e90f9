//! Existing MCP servers as Wharf backends (issue 40): the bundled `mcp-bridge` component
//! in front of the official Python SDK's FastMCP over streamable HTTP, its tools listed
//! and called over REST, MCP and the compatibility API; a tool the server adds while
//! running reaches a connected MCP client as `list_changed`; a tenant's allowlist and rate
//! hold on bridged tools as on a component's; and servers that misbehave on purpose are
//! contained (`hostile_server.py`), each a test.

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf::config::{QuotaConfig, TokenScope};
use wharf_integration_tests::mcp_servers::{McpServer, bridge, mcp_client, number};
use wharf_integration_tests::{TestHost, bundled, eventually, start, start_with, token};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_server_serves_its_tools_over_rest_mcp_and_the_compatibility_api() {
    let server = McpServer::demo().await;
    let h = start(vec![("bridge", bridge(&server)), ("echo", bundled("echo"))]).await;

    // Listed with the server's own schemas.
    let tools = h.get("/v1/tools").await.body["data"]["tools"].clone();
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bridge:add")
        .unwrap_or_else(|| panic!("bridge:add not listed: {tools}"))
        .clone();
    let schema = &add["input_schema"];
    assert!(
        schema["properties"]["a"].is_object() && schema["properties"]["b"].is_object(),
        "{add}"
    );

    // `/v1/backends` says which backend lists its tools, and how often it is asked.
    assert_eq!(
        h.backend_info("bridge").await["tools_listed_every_seconds"],
        1
    );
    assert!(h.backend_info("echo").await["tools_listed_every_seconds"].is_null());

    // REST.
    let r = h.call("bridge:add", json!({"a": 2, "b": 40})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(number(&r.body["data"]["result"]), 42);
    let r = h.call("bridge:echo", json!({"text": "über"})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert!(
        r.body["data"]["result"].to_string().contains("über"),
        "{}",
        r.body
    );
    // The host checks arguments against the server's inputSchema before the server sees them.
    let r = h.call("bridge:add", json!({"a": "two", "b": 1})).await;
    assert_eq!(r.code(), 4004, "{}", r.body);
    let r = h.call("bridge:add", json!({"a": 2})).await;
    assert_eq!(r.code(), 4003, "{}", r.body);
    // A tool error (isError) is the backend's execution error, with the server's message.
    let r = h
        .call("bridge:fail", json!({"message": "the disk is on fire"}))
        .await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("the disk is on fire"),
        "{}",
        r.body
    );
    // An image content item arrives as an attachment.
    let r = h.call("bridge:image", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let attachment = &r.body["data"]["attachments"][0];
    assert_eq!(attachment["mime_type"], "image/png", "{}", r.body);
    assert!(attachment["size"].as_u64().unwrap() > 8);

    // MCP.
    let (client, _) = mcp_client(&h).await;
    let listed = client.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "bridge_add"), "{listed:?}");
    let params = CallToolRequestParams::new("bridge_add")
        .with_arguments(json!({"a": 20, "b": 22}).as_object().cloned().unwrap());
    let reply = client.call_tool(params).await.unwrap();
    assert_eq!(reply.is_error, Some(false));
    assert_eq!(
        number(reply.structured_content.as_ref().unwrap()),
        42,
        "{reply:?}"
    );
    client.cancel().await.unwrap();

    // The compatibility API.
    let body = json!({"action": "bridge:add", "params": {"a": 1, "b": 1}});
    let r = h.post("/api/v1/execute", body).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(number(&r.body["data"]), 2, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_server_adds_reaches_a_connected_client_as_list_changed() {
    let server = McpServer::demo().await;
    let h = start(vec![("live", bridge(&server))]).await;
    let (client, recorder) = mcp_client(&h).await;
    assert!(
        !h.tool_names("live")
            .await
            .contains(&"live:extra".to_string())
    );
    // The notification goes out on the client's standalone SSE stream; let it open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let changed = recorder.heard.notified();
    let r = h.call("live:enable_extra", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), changed)
        .await
        .expect("no notifications/tools/list_changed after the server added a tool");
    eprintln!(
        "list_changed {} ms after the server added the tool",
        started.elapsed().as_millis()
    );
    let listed = client.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "live_extra"), "{listed:?}");
    let r = h.call("live:extra", json!({"x": 4})).await;
    assert_eq!(number(&r.body["data"]["result"]), 40, "{}", r.body);

    // Removed on the server, gone from Wharf: listed nowhere, and a call is refused.
    let r = h.call("live:disable_extra", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    eventually(10, "live:extra is still listed", async || {
        !h.tool_names("live")
            .await
            .contains(&"live:extra".to_string())
    })
    .await;
    let r = h.call("live:extra", json!({"x": 4})).await;
    assert_eq!(r.code(), 4002, "{}", r.body);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_includes_and_excludes_bridged_tools_by_pattern() {
    let server = McpServer::demo().await;
    let mut config = bridge(&server);
    config.tools.include = vec!["a*".into(), "e*".into()];
    config.tools.exclude = vec!["enable_*".into()];
    let h = start(vec![("picked", config)]).await;
    assert_eq!(h.tool_names("picked").await, ["picked:add", "picked:echo"]);
    let r = h.call("picked:fail", json!({"message": "x"})).await;
    assert_eq!(r.code(), 4002, "{}", r.body);
}

/// A tenant allowed `allowed` only, at two calls a second (burst 2): a tool outside its
/// allowlist is refused with 4030, and past its rate it gets 4290, the same for a bridged
/// tool and for a component's.
async fn allowlist_and_rate_hold(h: &TestHost, allowed: &str, args: Value, other: &str) {
    let client = reqwest::Client::new();
    let send = async |tool: &str, args: &Value| {
        let r = client
            .post(format!("{}/v1/call", h.url))
            .bearer_auth("secret-agent")
            .json(&json!({"tool": tool, "args": args}))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap()
    };
    let r = send(other, &args).await;
    assert_eq!(r["code"], 4030, "{allowed}: {r}");
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(send(allowed, &args).await["code"].as_u64().unwrap());
    }
    assert_eq!(codes[0], 0, "{allowed}: {codes:?}");
    assert!(codes.contains(&4290), "{allowed}: past its rate: {codes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_allowlist_and_rate_hold_on_bridged_tools_as_on_component_tools() {
    let server = McpServer::demo().await;
    let h = start_with(
        vec![("bridge", bridge(&server)), ("echo", bundled("echo"))],
        |s| {
            let mut agent = token(
                "agent",
                "secret-agent",
                &[TokenScope::Read, TokenScope::Call],
            );
            agent.tools = Some(vec!["echo:say".into(), "bridge:echo".into()]);
            s.auth.tokens = vec![agent];
            s.quotas =
                toml::from_str::<QuotaConfig>("[tokens.agent]\ncalls_per_second = 2\nburst = 2\n")
                    .unwrap();
        },
    )
    .await;
    for (allowed, args, other) in [
        ("echo:say", json!({"text": "hi"}), "echo:fail"),
        ("bridge:echo", json!({"text": "hi"}), "bridge:add"),
    ] {
        allowlist_and_rate_hold(&h, allowed, args, other).await;
        // The next tenant second starts clean.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
}

/// A host with a bridge to the hostile server in `mode` (as `bad`) beside the echo
/// component, which must keep answering.
async fn hostile(
    mode: &str,
    tweak: impl FnOnce(&mut wharf::config::BackendConfig),
) -> (McpServer, TestHost) {
    let server = McpServer::hostile(mode).await;
    let mut config = bridge(&server);
    tweak(&mut config);
    let h = start(vec![("bad", config), ("echo", bundled("echo"))]).await;
    (server, h)
}

async fn echo_still_answers(h: &TestHost) {
    let r = h.call("echo:say", json!({"text": "still here"})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_malformed_json_rpc_is_a_clear_5000() {
    let (_server, h) = hostile("malformed", |_| {}).await;
    let r = h.call("bad:ok", json!({})).await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("json"),
        "{}",
        r.body
    );
    echo_still_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_meets_the_calls_deadline() {
    let (_server, h) = hostile("silent", |c| {
        c.limits.call_timeout_ms = Some(2_000);
    })
    .await;
    let started = Instant::now();
    let r = h.call("bad:ok", json!({})).await;
    let took = started.elapsed();
    assert_eq!(r.code(), 5006, "{}", r.body);
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    echo_still_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tool_names_and_huge_schemas_are_not_served() {
    let (_server, h) = hostile("hostile-names", |_| {}).await;
    assert_eq!(h.tool_names("bad").await, ["bad:ok"]);
    let r = h.call("bad:ok", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let (_server, h) = hostile("huge-schema", |_| {}).await;
    assert_eq!(h.tool_names("bad").await, ["bad:ok"]);
    echo_still_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_is_cut_at_the_response_bound() {
    let (_server, h) = hostile("flood", |c| {
        c.grants.max_http_response_bytes = 1 << 20;
    })
    .await;
    let r = h.call("bad:ok", json!({})).await;
    assert_ne!(r.code(), 0, "{}", r.body);
    assert!(r.code() >= 5000, "{}", r.body);
    echo_still_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_never_ends_is_bounded() {
    let (_server, h) = hostile("many-tools", |_| {}).await;
    let names = h.tool_names("bad").await;
    assert_eq!(
        names.len(),
        256,
        "a backend serves at most 256 listed tools"
    );
    echo_still_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_secret_authorizes_the_bridge_and_never_reaches_a_caller() {
    let value = "s3cret-bearer-4c1d9e";
    let server = McpServer::hostile_with("echo-auth", &[("WHARF_TEST_MCP_BEARER", value)]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_token");
    std::fs::write(&file, value).unwrap();
    let mut config = bridge(&server);
    config.config = Some(
        toml::from_str(&format!(
            "transport = \"http\"\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer ${{secret:mcp_token}}\" }}\n",
            server.url()
        ))
        .unwrap(),
    );
    config.grants.secrets =
        toml::from_str::<toml::Table>(&format!("mcp_token = \"file:{}\"", file.display()))
            .unwrap()
            .try_into()
            .unwrap();
    let h = start(vec![("authed", config)]).await;
    // Listed: the server accepted the bearer the bridge read from the granted secret.
    assert_eq!(
        h.tool_names("authed").await,
        ["authed:ok"],
        "{}",
        h.backend_info("authed").await
    );
    // The server echoes the credential back; the caller sees the secret's name only.
    let r = h.call("authed:ok", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let text = r.body.to_string();
    assert!(!text.contains(value), "{text}");
    assert!(text.contains("[secret:mcp_token]"), "{text}");
    let info = h.backend_info("authed").await.to_string();
    assert!(!info.contains(value), "{info}");

    // Without the grant the backend does not load, and says which secret it lacks.
    let mut ungranted = bridge(&server);
    ungranted.config = Some(
        toml::from_str(&format!(
            "transport = \"http\"\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer ${{secret:mcp_token}}\" }}\n",
            server.url()
        ))
        .unwrap(),
    );
    let err = h
        .wharf
        .load_backend("ungranted", ungranted)
        .await
        .unwrap_err();
    let err = format!("{err:#}");
    assert!(err.contains("mcp_token") && !err.contains(value), "{err}");
}

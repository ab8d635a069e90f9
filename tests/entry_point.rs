//! The one entry point every protocol shares (`Wharf::invoke`): the same tool with the same
//! session key over REST, MCP and the compatibility API runs in the same session, under the
//! caller's tenant; a typo'd backend is a 4xx on every protocol; a token's allowlist and a
//! missing session are refused alike.

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use wharf::config::{TokenConfig, TokenScope};
use wharf_integration_tests::{TestHost, bundled, start_with};

type Client = RunningService<RoleClient, ()>;

fn token(name: &str, scopes: &[TokenScope], backends: Option<&[&str]>) -> TokenConfig {
    TokenConfig {
        name: name.into(),
        value: Some(format!("secret-{name}")),
        value_file: None,
        scopes: scopes.to_vec(),
        backends: backends.map(|b| b.iter().map(|s| s.to_string()).collect()),
        tools: None,
    }
}

async fn host() -> TestHost {
    let call = [TokenScope::Read, TokenScope::Call];
    start_with(
        vec![("echo", bundled("echo")), ("pad", bundled("scratchpad"))],
        |s| {
            s.auth.tokens = vec![
                token("agent", &call, None),
                token("other", &call, None),
                token("echo-only", &call, Some(&["echo"])),
            ];
        },
    )
    .await
}

/// A request as `who`: the HTTP status and the JSON body.
async fn send(h: &TestHost, who: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", h.url);
    let request = match method {
        "GET" => client.get(url),
        _ => client.post(url).json(&body),
    };
    let r = request
        .bearer_auth(format!("secret-{who}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// An MCP client authenticated as `who`, sending `X-Wharf-Session-Key: key` when given.
async fn mcp(h: &TestHost, who: &str, key: Option<&str>) -> Client {
    let mut headers = HashMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer secret-{who}")).unwrap(),
    );
    if let Some(key) = key {
        headers.insert(
            HeaderName::from_static("x-wharf-session-key"),
            HeaderValue::from_str(key).unwrap(),
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url))
        .custom_headers(headers);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn mcp_call(
    client: &Client,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    client.call_tool(params).await
}

fn mcp_session(r: &CallToolResult) -> Value {
    let meta = r.meta.as_ref().expect("a result's _meta");
    meta.0
        .get("wharf/session_id")
        .cloned()
        .unwrap_or(Value::Null)
}

fn mcp_text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_is_one_session_over_every_protocol() {
    let h = host().await;
    // REST makes the session of key `k1` and writes the first note.
    let (status, made) = send(
        &h,
        "agent",
        "POST",
        "/v1/sessions",
        json!({"backend": "pad", "key": "k1"}),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let id = made["data"]["id"].as_str().unwrap().to_string();
    let (_, first) = send(
        &h,
        "agent",
        "POST",
        "/v1/call",
        json!({"tool": "pad:write", "args": {"note": "rest"}, "session_id": id}),
    )
    .await;
    assert_eq!(first["data"]["result"]["count"], 1, "{first}");

    // MCP with the same key: the same session, so the second note.
    let client = mcp(&h, "agent", Some("k1")).await;
    let r = mcp_call(&client, "pad_write", json!({"note": "mcp"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(r.structured_content, Some(json!({"count": 2})));
    assert_eq!(mcp_session(&r), json!(id));

    // The compatibility API with the key as the worker id: the third note.
    let (status, third) = send(
        &h,
        "agent",
        "POST",
        "/api/v1/execute",
        json!({"worker_id": "k1", "action": "pad:write", "params": {"note": "compat"}}),
    )
    .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(third["data"]["count"], 3, "{third}");
    assert_eq!(third["meta"]["session_id"], json!(id));

    // One session in all, the caller's own; another tenant with the same key has its own.
    let (_, listed) = send(&h, "agent", "GET", "/v1/sessions", Value::Null).await;
    let sessions = listed["data"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{listed}");
    let other = mcp(&h, "other", Some("k1")).await;
    let r = mcp_call(&other, "pad_write", json!({"note": "mine"}))
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"count": 1})), "{r:?}");
    assert_ne!(mcp_session(&r), json!(id));
    let (_, theirs) = send(&h, "other", "GET", "/v1/sessions", Value::Null).await;
    assert_eq!(theirs["data"]["sessions"].as_array().unwrap().len(), 1);
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_is_the_callers_fault_on_every_protocol() {
    let h = host().await;
    let rest = [
        ("/v1/call", json!({"tool": "pda:write", "args": {}})),
        ("/v1/sessions", json!({"backend": "pda"})),
        (
            "/api/v1/execute",
            json!({"worker_id": "w", "action": "pda:write", "params": {}}),
        ),
        (
            "/api/v1/session/create",
            json!({"worker_id": "w", "resource_type": "pda"}),
        ),
    ];
    for (path, body) in rest {
        let (status, reply) = send(&h, "agent", "POST", path, body).await;
        assert_eq!(
            (status, reply["code"].as_u64()),
            (400, Some(4002)),
            "{path}: {reply}"
        );
        assert_ne!(reply["retryable"], json!(true), "{path}: {reply}");
    }
    let client = mcp(&h, "agent", Some("w")).await;
    match mcp_call(&client, "pda_write", json!({})).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{e:?}")
        }
        other => panic!("expected invalid params, got {other:?}"),
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlists_and_missing_sessions_are_refused_alike() {
    let h = host().await;
    // A token limited to `echo` may not write a pad, whatever the protocol.
    let (status, rest) = send(
        &h,
        "echo-only",
        "POST",
        "/v1/call",
        json!({"tool": "pad:write", "args": {"note": "x"}}),
    )
    .await;
    assert_eq!((status, rest["code"].as_u64()), (403, Some(4030)), "{rest}");
    let (status, compat) = send(
        &h,
        "echo-only",
        "POST",
        "/api/v1/execute",
        json!({"worker_id": "w", "action": "pad:write", "params": {"note": "x"}}),
    )
    .await;
    assert_eq!(
        (status, compat["code"].as_u64()),
        (403, Some(4030)),
        "{compat}"
    );
    let client = mcp(&h, "echo-only", Some("w")).await;
    let r = mcp_call(&client, "pad_write", json!({"note": "x"}))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(mcp_text(&r).starts_with("4030: "), "{r:?}");
    // Refused before any session was made for it.
    let (_, listed) = send(&h, "echo-only", "GET", "/v1/sessions", Value::Null).await;
    assert_eq!(listed["data"]["sessions"], json!([]), "{listed}");
    client.cancel().await.unwrap();

    // A tool that needs a session, called with none: 4007 over REST, the compatibility
    // API asks for its worker id (4003), and nothing runs.
    let (status, rest) = send(
        &h,
        "agent",
        "POST",
        "/v1/call",
        json!({"tool": "pad:write", "args": {"note": "x"}}),
    )
    .await;
    assert_eq!((status, rest["code"].as_u64()), (404, Some(4007)), "{rest}");
    let (status, compat) = send(
        &h,
        "agent",
        "POST",
        "/api/v1/execute",
        json!({"action": "pad:write", "params": {"note": "x"}}),
    )
    .await;
    assert_eq!(
        (status, compat["code"].as_u64()),
        (400, Some(4003)),
        "{compat}"
    );
    assert_eq!(compat["meta"]["tool"], "pad:write", "{compat}");
    let (_, listed) = send(&h, "agent", "GET", "/v1/sessions", Value::Null).await;
    assert_eq!(listed["data"]["sessions"], json!([]), "{listed}");
}

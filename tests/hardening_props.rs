//! Property test over the JSON bodies of every route (REST `/v1`, compat `/api/v1`, MCP
//! `tools/call`): arbitrary JSON and hostile numbers never panic the host, every answer
//! carries a code from the table, and `/healthz` still answers after each case.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use wharf::Code;
use wharf_integration_tests::{TestHost, bundled, start};

/// Every route that takes a JSON body.
const ROUTES: &[&str] = &[
    "/v1/sessions",
    "/v1/call",
    "/api/v1/session/create",
    "/api/v1/session/destroy",
    "/api/v1/session/list",
    "/api/v1/session/refresh",
    "/api/v1/lifecycle/heartbeat",
    "/api/v1/worker/disconnect",
    "/api/v1/execute",
    "/api/v1/execute/batch",
];

/// Field names the routes read, so generated bodies reach past the first check.
const FIELDS: &[&str] = &[
    "backend",
    "key",
    "config",
    "ttl_seconds",
    "owner",
    "holder",
    "tool",
    "args",
    "session_id",
    "timeout_ms",
    "worker_id",
    "resource_type",
    "session_config",
    "ttl",
    "target_session_id",
    "action",
    "params",
    "timeout",
    "trace_id",
    "actions",
    "text",
    "times",
    "note",
];

/// Names the host knows, so generated bodies name real backends and tools.
const NAMES: &[&str] = &[
    "echo",
    "pad",
    "echo:say",
    "echo.say",
    "say",
    "pad:write",
    "pad:read",
    "w1",
    "",
];

/// Numbers that once overflowed, wrapped or panicked somewhere.
fn hostile_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(i64::MAX)),
        Just(json!(-1)),
        Just(json!(18_446_744_073_709_551u64)),
        Just(json!(316_224_001u64)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.5)),
        Just(json!(0)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => hostile_number(),
        1 => ".{0,12}".prop_map(Value::String),
        2 => prop::sample::select(NAMES).prop_map(|n| json!(n)),
    ]
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(FIELDS).prop_map(str::to_string),
        1 => "[a-z_]{1,8}",
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(field(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A request body as bytes: mostly objects of known fields, sometimes any JSON, sometimes
/// a number no JSON library holds.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let object = prop::collection::btree_map(field(), any_json(), 0..7)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()));
    let huge = (
        prop::sample::select(FIELDS),
        prop::sample::select(&[
            "18446744073709551616",
            "-0",
            "1e999",
            "99999999999999999999999999999",
            "-9223372036854775809",
        ]),
    )
        .prop_map(|(f, n)| {
            format!(r#"{{"backend":"pad","resource_type":"pad","worker_id":"w1","{f}":{n}}}"#)
                .into_bytes()
        });
    prop_oneof![
        5 => object.prop_map(|v| v.to_string().into_bytes()),
        2 => any_json().prop_map(|v| v.to_string().into_bytes()),
        1 => huge,
    ]
}

fn mcp_call() -> impl Strategy<Value = (String, Map<String, Value>)> {
    let tool = prop_oneof![
        4 => prop::sample::select(&["echo_say", "pad_write", "pad_read", "echo_ping"][..]).prop_map(str::to_string),
        1 => "[a-z_]{1,10}",
    ];
    let args = prop::collection::btree_map(field(), any_json(), 0..5)
        .prop_map(|m| m.into_iter().collect::<Map<_, _>>());
    (tool, args)
}

fn check_code(code: u64, what: &str) -> Result<(), TestCaseError> {
    let known = u32::try_from(code).ok().and_then(Code::from_u32).is_some();
    prop_assert!(known, "{what}: code {code} is not in the table");
    Ok(())
}

async fn post(h: &TestHost, route: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let what = format!("POST {route} {}", String::from_utf8_lossy(&body));
    let response = reqwest::Client::new()
        .post(format!("{}{route}", h.url))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("{what}: no answer: {e}")))?;
    let text = response
        .text()
        .await
        .map_err(|e| TestCaseError::fail(format!("{what}: answer cut: {e}")))?;
    let reply: Value = serde_json::from_str(&text)
        .map_err(|_| TestCaseError::fail(format!("{what}: not JSON: {text}")))?;
    let code = reply["code"]
        .as_u64()
        .ok_or_else(|| TestCaseError::fail(format!("{what}: no code: {text}")))?;
    check_code(code, &what)
}

type Client = RunningService<RoleClient, ()>;

async fn mcp(client: &Client, tool: String, args: Map<String, Value>) -> Result<(), TestCaseError> {
    let what = format!("tools/call {tool} {args:?}");
    match client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
    {
        Ok(result) if result.is_error == Some(true) => {
            let text = result
                .content
                .iter()
                .find_map(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            let code = text
                .split(':')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| TestCaseError::fail(format!("{what}: no code in {text}")))?;
            check_code(code, &what)
        }
        Ok(_) => Ok(()),
        // A protocol-level refusal (unknown tool, bad params) is an answer too.
        Err(ServiceError::McpError(_)) => Ok(()),
        Err(e) => Err(TestCaseError::fail(format!("{what}: no answer: {e}"))),
    }
}

async fn healthy(h: &TestHost) -> Result<(), TestCaseError> {
    let reply = h.get("/healthz").await;
    prop_assert_eq!(reply.code(), 0);
    Ok(())
}

#[test]
fn every_route_answers_hostile_bodies_with_a_code_from_the_table() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (h, client) = rt.block_on(async {
        let h = start(vec![
            ("echo", bundled("echo")),
            ("pad", bundled("scratchpad")),
        ])
        .await;
        let mut headers = HashMap::new();
        headers.insert(
            HeaderName::from_static("x-wharf-session-key"),
            HeaderValue::from_static("props"),
        );
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url))
            .custom_headers(headers);
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("MCP client connects");
        (h, client)
    });
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&(body(), mcp_call()), |(body, (tool, args))| {
        rt.block_on(async {
            for route in ROUTES {
                post(&h, route, body.clone()).await?;
            }
            mcp(&client, tool, args).await?;
            healthy(&h).await
        })
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    rt.block_on(async {
        let _ = client.cancel().await;
    });
    drop(h);
}

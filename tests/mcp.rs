//! MCP at `/mcp` through the rmcp client over real HTTP: tools/list and tools/call, tool
//! errors, sessions acquired by key, list-changed notifications, progress, cancellation,
//! and the Host check.

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, ProgressNotificationParam,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use wharf_integration_tests::{TestHost, bundled, containers_labelled, docker_provider, docker_ready, start};

/// Records what the server pushes.
#[derive(Clone, Default)]
struct Recorder {
    list_changed: Arc<Notify>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Recorder>;

/// An MCP client of `h`, sending `X-Wharf-Session-Key: key` when given.
async fn connect(h: &TestHost, key: Option<&str>) -> (Client, Recorder) {
    let mut headers = HashMap::new();
    if let Some(key) = key {
        headers.insert(HeaderName::from_static("x-wharf-session-key"), HeaderValue::from_str(key).unwrap());
    }
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url)).custom_headers(headers);
    let recorder = Recorder::default();
    let client = recorder.clone().serve(StreamableHttpClientTransport::from_config(config)).await.expect("MCP client connects");
    (client, recorder)
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    client.call_tool(params(tool, args)).await.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A call that must succeed; its structured content.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_eq!(r.is_error, Some(false), "{tool}: {r:?}");
    r.structured_content.clone().unwrap_or_else(|| panic!("{tool} has no structured content: {r:?}"))
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().find_map(|c| c.as_text().map(|t| t.text.clone())).unwrap_or_default()
}

fn session_of(r: &CallToolResult) -> Value {
    r.meta.as_ref().and_then(|m| m.get("wharf/session_id").cloned()).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_list_and_call() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let (client, _) = connect(&h, None).await;

    let info = client.peer_info().expect("initialized");
    let server = info.server_info.as_ref().expect("server info");
    assert_eq!((server.name.as_str(), server.version.as_str()), ("wharf", env!("CARGO_PKG_VERSION")));
    assert_eq!(info.capabilities.tools.as_ref().and_then(|t| t.list_changed), Some(true));

    let tools = client.list_all_tools().await.unwrap();
    let say = tools.iter().find(|t| t.name == "echo_say").expect("echo_say is listed");
    assert!(tools.iter().all(|t| t.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')));
    assert_eq!(say.input_schema.get("type"), Some(&json!("object")));
    assert!(say.input_schema["properties"]["text"].is_object(), "{:?}", say.input_schema);
    assert_eq!(say.input_schema["required"], json!(["text"]));
    let hints = say.annotations.as_ref().expect("annotations");
    let rest = h.get("/v1/tools").await.body["data"]["tools"].as_array().unwrap().clone();
    let rest = &rest.iter().find(|t| t["name"] == "echo:say").expect("echo:say over REST")["annotations"];
    assert_eq!(
        (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint),
        (Some(true), Some(false), rest["idempotent"].as_bool(), Some(false))
    );
    assert!(say.description.as_deref().unwrap_or("").contains("Echo"));

    // Success: structured content plus the same JSON as text.
    let r = call(&client, "echo_say", json!({"text": "hi", "times": 2})).await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(r.structured_content, Some(json!({"text": "hihi"})));
    assert_eq!(serde_json::from_str::<Value>(&text(&r)).unwrap(), json!({"text": "hihi"}));

    // Tool failures are results with isError and "<code>: <message>".
    let r = call(&client, "echo_fail", json!({"code": 4001, "message": "nope"})).await;
    assert_eq!((r.is_error, text(&r).as_str()), (Some(true), "4001: nope"));
    let r = call(&client, "echo_say", json!({"text": 5})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).starts_with("4004: "), "{}", text(&r));

    // Attachments: an image content block.
    let r = call(&client, "echo_pixel", json!({})).await;
    let image = r.content.iter().find_map(|c| c.as_image()).expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(!image.data.is_empty());

    // An unknown tool is a JSON-RPC invalid-params error, not a result.
    match client.call_tool(params("echo_nothing", json!({}))).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}"),
        other => panic!("expected invalid params, got {other:?}"),
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_follow_the_mcp_session_or_the_key() {
    let docker = docker_ready();
    let mut backends = vec![("pad", bundled("scratchpad"))];
    if docker {
        backends.push(("docker", docker_provider()));
    }
    let h = start(backends).await;

    // No key: the MCP session is the key, so notes written in it are read back in it.
    let (alone, _) = connect(&h, None).await;
    assert_eq!(ok(&alone, "pad_write", json!({"note": "one"})).await, json!({"count": 1}));
    assert_eq!(ok(&alone, "pad_write", json!({"note": "two"})).await, json!({"count": 2}));
    assert_eq!(ok(&alone, "pad_read", json!({})).await["notes"], json!(["one", "two"]));

    // Two clients with the same key share one pad; the first client's pad is separate.
    let (first, _) = connect(&h, Some("agent-7")).await;
    let written = call(&first, "pad_write", json!({"note": "shared"})).await;
    let (second, _) = connect(&h, Some("agent-7")).await;
    let read = call(&second, "pad_read", json!({})).await;
    assert_eq!(read.structured_content.as_ref().map(|c| c["notes"].clone()), Some(json!(["shared"])));
    assert_eq!(session_of(&read), session_of(&written));
    assert!(session_of(&read).is_string());
    assert_eq!(ok(&alone, "pad_read", json!({})).await["notes"], json!(["one", "two"]));

    // The key may also come in `_meta`.
    let (third, _) = connect(&h, None).await;
    let mut meta = RequestMetaObject::new();
    meta.insert("wharf/session_key".into(), json!("agent-7"));
    let mut read_by_meta = params("pad_read", json!({}));
    read_by_meta.meta = Some(meta);
    let r = third.call_tool(read_by_meta).await.unwrap();
    assert_eq!(r.structured_content.map(|c| c["notes"].clone()), Some(json!(["shared"])));

    if docker {
        // Same key, same sandbox: a file written by one client is read by the other.
        let w = call(&first, "docker_write_file", json!({"path": "/tmp/mcp.txt", "content": "from client 1"})).await;
        assert_eq!(w.is_error, Some(false), "{w:?}");
        let r = ok(&second, "docker_read_file", json!({"path": "/tmp/mcp.txt"})).await;
        assert_eq!(r["content"], "from client 1", "{r}");
        h.delete(&format!("/v1/sessions/{}", session_of(&w).as_str().unwrap())).await;
    }
    for client in [alone, first, second, third] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_a_backend_notifies_list_changed() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let (client, recorder) = connect(&h, None).await;
    assert!(!client.list_all_tools().await.unwrap().iter().any(|t| t.name == "echo2_say"));
    // The notification goes out on the client's standalone SSE stream; give it a moment to
    // open, then load (again, should the first one have raced the stream).
    let mut notified = false;
    for _ in 0..1 {
        h.wharf.load_backend("echo2", bundled("echo")).await.unwrap();
        if tokio::time::timeout(Duration::from_secs(5), recorder.list_changed.notified()).await.is_ok() {
            notified = true;
            break;
        }
    }
    assert!(notified, "no notifications/tools/list_changed after loading a backend");
    assert!(client.list_all_tools().await.unwrap().iter().any(|t| t.name == "echo2_say"));
    client.cancel().await.unwrap();
}

/// Sends a `tools/call` that the test may cancel.
async fn start_call(client: &Client, tool: &str, args: Value) -> rmcp::service::RequestHandle<RoleClient> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(tool, args)));
    client.send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap()
}

/// Waits until `n` progress notifications have arrived.
async fn progress_reports(recorder: &Recorder, n: usize) -> Vec<f64> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let seen: Vec<f64> = recorder.progress.lock().unwrap().iter().map(|p| p.progress).collect();
        if seen.len() >= n {
            return seen;
        }
        assert!(Instant::now() < deadline, "only {} progress notifications arrived", seen.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_calls_report_progress_and_cancelling_drops_them() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let (client, recorder) = connect(&h, None).await;
    let started = Instant::now();
    let spinning = start_call(&client, "bad_spin", json!({})).await;
    let seen = progress_reports(&recorder, 2).await;
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "progress increases: {seen:?}");
    assert!(started.elapsed() >= Duration::from_secs(2));
    spinning.cancel(Some("test".into())).await.unwrap();

    // The spinning instance is dropped at once (not at the 30 s call timeout).
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.backend_info("bad").await["instances"]["discarded"].as_u64().unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the cancelled call's instance was not discarded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    let reports = recorder.progress.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(recorder.progress.lock().unwrap().len(), reports, "no progress after the cancel");
    // A number is not an object, so for this protocol version it comes back only as text.
    let count = call(&client, "bad_count", json!({})).await;
    assert_eq!(count.is_error, Some(false));
    assert!(text(&count).parse::<u64>().is_ok(), "{count:?}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_sandbox_command_kills_it() {
    if !docker_ready() {
        return;
    }
    let h = start(vec![("docker", docker_provider())]).await;
    let (client, recorder) = connect(&h, Some("cancel-me")).await;
    let ready = call(&client, "docker_run_command", json!({"command": "echo ready"})).await;
    assert_eq!(ready.structured_content.as_ref().map(|c| c["stdout"].clone()), Some(json!("ready\n")), "{ready:?}");

    let sleeping = start_call(&client, "docker_run_command", json!({"command": "sleep 30"})).await;
    progress_reports(&recorder, 1).await;
    // Calls in one session run one at a time, so look from outside while it runs.
    let session = session_of(&ready).as_str().unwrap().to_string();
    let container = containers_labelled("wharf.session", &session).pop().expect("the session's container");
    let ps = std::process::Command::new("docker").args(["exec", &container, "ps"]).output().unwrap();
    assert!(String::from_utf8_lossy(&ps.stdout).contains("sleep 30"), "the command runs: {ps:?}");
    sleeping.cancel(Some("test".into())).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ps = ok(&client, "docker_run_command", json!({"command": "ps"})).await;
        if !ps["stdout"].as_str().unwrap().contains("sleep 30") {
            break;
        }
        assert!(Instant::now() < deadline, "the cancelled command still runs: {ps}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    h.delete(&format!("/v1/sessions/{session}")).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_headers_are_refused_on_loopback() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}});
    let post = |host: &str| {
        reqwest::Client::new()
            .post(format!("{}/mcp", h.url))
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
    };
    assert_eq!(post("evil.example:80").await.unwrap().status(), 403);
    assert_eq!(post(&format!("attacker.test:{}", h.addr.port())).await.unwrap().status(), 403);
    for host in [format!("localhost:{}", h.addr.port()), h.addr.to_string(), "[::1]".into()] {
        let reply = post(&host).await.unwrap();
        assert_eq!(reply.status(), 200, "Host: {host}");
        assert!(reply.headers().contains_key("mcp-session-id"));
    }
}

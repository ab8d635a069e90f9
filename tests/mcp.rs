//! MCP at `/mcp` through the rmcp client over real HTTP: tools/list and tools/call, tool
//! errors, sessions acquired by key, list-changed notifications, progress, cancellation,
//! and the Host check.

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode,
    ProgressNotificationParam, RequestMetaObject,
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
use wharf_integration_tests::{
    TestHost, bundled, containers_labelled, docker_provider, docker_ready, eventually, start,
};

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
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Recorder>;

/// An MCP client of `h`, sending `X-Wharf-Session-Key: key` when given.
async fn connect(h: &TestHost, key: Option<&str>) -> (Client, Recorder) {
    let mut headers = HashMap::new();
    if let Some(key) = key {
        headers.insert(
            HeaderName::from_static("x-wharf-session-key"),
            HeaderValue::from_str(key).unwrap(),
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url))
        .custom_headers(headers);
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = recorder.clone().serve(transport).await.unwrap();
    (client, recorder)
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let reply = client.call_tool(params(tool, args)).await;
    reply.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A call that must succeed; its structured content.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_eq!(r.is_error, Some(false), "{tool}: {r:?}");
    let content = r.structured_content.clone();
    content.unwrap_or_else(|| panic!("{tool} has no structured content: {r:?}"))
}

fn text(r: &CallToolResult) -> String {
    let mut texts = r.content.iter().filter_map(|c| c.as_text());
    texts.next().map(|t| t.text.clone()).unwrap_or_default()
}

/// Whether `tools/list` shows `name`.
async fn has_tool(client: &Client, name: &str) -> bool {
    let tools = client.list_all_tools().await.unwrap();
    tools.iter().any(|t| t.name == name)
}

async fn notes(client: &Client) -> Value {
    ok(client, "pad_read", json!({})).await["notes"].clone()
}

fn session_of(r: &CallToolResult) -> Value {
    let meta = r.meta.clone().unwrap_or_default();
    meta.get("wharf/session_id").cloned().unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_list_and_call() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let (client, _) = connect(&h, None).await;

    let info = client.peer_info().expect("initialized");
    let server = info.server_info.clone().expect("server info");
    assert_eq!(
        (server.name, server.version),
        ("wharf".into(), env!("CARGO_PKG_VERSION").into())
    );
    assert_eq!(
        info.capabilities.tools.clone().and_then(|t| t.list_changed),
        Some(true)
    );

    let tools = client.list_all_tools().await.unwrap();
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    assert!(tools.iter().all(|t| t.name.chars().all(valid)));
    let say = tools.iter().find(|t| t.name == "echo_say").unwrap();
    assert!(say.description.as_deref().unwrap_or("").contains("Echo"));
    let schema = Value::Object((*say.input_schema).clone());
    assert_eq!(
        (&schema["type"], &schema["required"]),
        (&json!("object"), &json!(["text"]))
    );
    assert!(schema["properties"]["text"].is_object(), "{schema}");
    let listed = h.get("/v1/tools").await.body["data"]["tools"].clone();
    let listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo:say");
    let hints = &listed.expect("echo:say over REST")["annotations"];
    let expected = json!({"readOnlyHint": true, "destructiveHint": false,
        "idempotentHint": hints["idempotent"], "openWorldHint": false});
    assert_eq!(serde_json::to_value(&say.annotations).unwrap(), expected);

    // Success: structured content plus the same JSON as text.
    let r = call(&client, "echo_say", json!({"text": "hi", "times": 2})).await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(r.structured_content, Some(json!({"text": "hihi"})));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap(),
        json!({"text": "hihi"})
    );

    // Tool failures are results with isError and "<code>: <message>".
    let r = call(
        &client,
        "echo_fail",
        json!({"code": 4001, "message": "nope"}),
    )
    .await;
    assert_eq!((r.is_error, text(&r).as_str()), (Some(true), "4001: nope"));
    let r = call(&client, "echo_say", json!({"text": 5})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).starts_with("4004: "), "{}", text(&r));

    // Attachments: an image content block.
    let r = call(&client, "echo_pixel", json!({})).await;
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image");
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
    assert_eq!(
        ok(&alone, "pad_write", json!({"note": "one"})).await,
        json!({"count": 1})
    );
    assert_eq!(
        ok(&alone, "pad_write", json!({"note": "two"})).await,
        json!({"count": 2})
    );
    assert_eq!(notes(&alone).await, json!(["one", "two"]));

    // Two clients with the same key share one pad; the first client's pad is separate.
    let (first, _) = connect(&h, Some("agent-7")).await;
    let written = call(&first, "pad_write", json!({"note": "shared"})).await;
    let (second, _) = connect(&h, Some("agent-7")).await;
    let read = call(&second, "pad_read", json!({})).await;
    assert_eq!(
        read.structured_content.as_ref().unwrap()["notes"],
        json!(["shared"])
    );
    assert_eq!(session_of(&read), session_of(&written));
    assert!(session_of(&read).is_string());
    assert_eq!(notes(&alone).await, json!(["one", "two"]));

    // The key may also come in `_meta`.
    let (third, _) = connect(&h, None).await;
    let mut read_by_meta = params("pad_read", json!({}));
    let mut meta = RequestMetaObject::new();
    meta.insert("wharf/session_key".into(), json!("agent-7"));
    read_by_meta.meta = Some(meta);
    let r = third.call_tool(read_by_meta).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["notes"], json!(["shared"]));

    if docker {
        // Same key, same sandbox: a file written by one client is read by the other.
        let args = json!({"path": "/tmp/mcp.txt", "content": "from client 1"});
        let w = call(&first, "docker_write_file", args).await;
        assert_eq!(w.is_error, Some(false), "{w:?}");
        let r = ok(&second, "docker_read_file", json!({"path": "/tmp/mcp.txt"})).await;
        assert_eq!(r["content"], "from client 1", "{r}");
        let id = session_of(&w);
        h.delete(&format!("/v1/sessions/{}", id.as_str().unwrap()))
            .await;
    }
    for client in [alone, first, second, third] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_a_backend_notifies_list_changed() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let (client, recorder) = connect(&h, None).await;
    assert!(!has_tool(&client, "echo2_say").await);
    // The notification goes out on the client's standalone SSE stream; let it open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.wharf
        .load_backend("echo2", bundled("echo"))
        .await
        .unwrap();
    let changed = recorder.list_changed.notified();
    let notified = tokio::time::timeout(Duration::from_secs(5), changed).await;
    assert!(notified.is_ok(), "no notifications/tools/list_changed");
    assert!(has_tool(&client, "echo2_say").await);
    client.cancel().await.unwrap();
}

/// Sends a `tools/call` that the test may cancel.
async fn start_call(
    client: &Client,
    tool: &str,
    args: Value,
) -> rmcp::service::RequestHandle<RoleClient> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(tool, args)));
    client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap()
}

/// Waits until `n` progress notifications have arrived; their values.
async fn progress_reports(recorder: &Recorder, n: usize) -> Vec<f64> {
    let seen = || {
        recorder
            .progress
            .lock()
            .unwrap()
            .iter()
            .map(|p| p.progress)
            .collect::<Vec<f64>>()
    };
    eventually(15, "too few progress notifications", async || {
        seen().len() >= n
    })
    .await;
    seen()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_calls_report_progress_and_cancelling_drops_them() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let (client, recorder) = connect(&h, None).await;
    let started = Instant::now();
    let spinning = start_call(&client, "bad_spin", json!({})).await;
    let seen = progress_reports(&recorder, 2).await;
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {seen:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
    spinning.cancel(Some("test".into())).await.unwrap();

    // The spinning instance is dropped at once (not at the 30 s call timeout).
    let discarded = async || h.backend_info("bad").await["instances"]["discarded"] != 0;
    eventually(
        10,
        "the cancelled call's instance was not discarded",
        discarded,
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    let reports = recorder.progress.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        recorder.progress.lock().unwrap().len(),
        reports,
        "no progress after the cancel"
    );
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
    let ready = call(
        &client,
        "docker_run_command",
        json!({"command": "echo ready"}),
    )
    .await;
    assert_eq!(
        ready.structured_content.as_ref().unwrap()["stdout"],
        "ready\n",
        "{ready:?}"
    );

    let sleep = json!({"command": "sleep 30"});
    let sleeping = start_call(&client, "docker_run_command", sleep).await;
    progress_reports(&recorder, 1).await;
    // Calls in one session run one at a time, so look from outside while it runs.
    let session = session_of(&ready).as_str().unwrap().to_string();
    let container = containers_labelled("wharf.session", &session).pop();
    let mut ps = std::process::Command::new("docker");
    let ps = ps
        .args(["exec", &container.unwrap(), "ps"])
        .output()
        .unwrap();
    let ps = String::from_utf8(ps.stdout).unwrap();
    assert!(ps.contains("sleep 30"), "the command runs: {ps}");
    sleeping.cancel(Some("test".into())).await.unwrap();

    let gone = async || {
        let ps = ok(&client, "docker_run_command", json!({"command": "ps"})).await;
        !ps["stdout"].as_str().unwrap().contains("sleep 30")
    };
    eventually(15, "the cancelled command still runs", gone).await;
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
    let port = h.addr.port();
    for host in [
        "evil.example:80".to_string(),
        format!("attacker.test:{port}"),
    ] {
        assert_eq!(post(&host).await.unwrap().status(), 403, "Host: {host}");
    }
    for host in [
        format!("localhost:{port}"),
        h.addr.to_string(),
        "[::1]".into(),
    ] {
        let reply = post(&host).await.unwrap();
        assert_eq!(reply.status(), 200, "Host: {host}");
        assert!(reply.headers().contains_key("mcp-session-id"));
    }
}

/// A server whose `/hold` answers only once `want` requests are in it at the same time (or
/// after 5 s), and remembers the most it saw at once.
async fn rendezvous(want: usize) -> (String, Arc<Mutex<usize>>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(Mutex::new(0usize));
    let all_in = Arc::new(Notify::new());
    let (f, m, n) = (in_flight.clone(), most.clone(), all_in.clone());
    let app = axum::Router::new().route(
        "/hold",
        axum::routing::get(move || {
            let (f, m, n) = (f.clone(), m.clone(), n.clone());
            async move {
                let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                {
                    let mut most = m.lock().unwrap();
                    *most = (*most).max(now);
                }
                if now >= want {
                    n.notify_waiters();
                } else {
                    let _ = tokio::time::timeout(Duration::from_secs(5), n.notified()).await;
                }
                f.fetch_sub(1, Ordering::SeqCst);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://127.0.0.1:{port}/hold"), most)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_mcp_session_run_side_by_side() {
    let (url, most) = rendezvous(3).await;
    let port = url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut probe = bundled("probe");
    probe.grants.http_hosts = vec![format!("127.0.0.1:{port}")];
    probe.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    let h = start(vec![("probe", probe)]).await;
    let (client, _) = connect(&h, None).await;
    // Three calls of one MCP session, each held by the server until all three are in it:
    // answered one after another, the first would wait out the 5 s and the most at once be 1.
    let calls = (0..3).map(|_| call(&client, "probe_fetch", json!({"url": url})));
    let replies = futures::future::join_all(calls).await;
    for r in &replies {
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    assert_eq!(
        *most.lock().unwrap(),
        3,
        "the session's three calls ran at once"
    );
}

/// The transport's own refusals carry Wharf's envelope and code where the table has one
/// (no MCP session id 4002, an unknown one 4007, a JSON body that is no JSON-RPC message
/// 4002), and say they are text where it has none (406).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_refusals_are_envelopes() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let client = reqwest::Client::new();
    let mcp = |method: reqwest::Method| {
        client
            .request(method, format!("{}/mcp", h.url))
            .header("accept", "application/json, text/event-stream")
    };
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let cases = [
        (mcp(reqwest::Method::POST).json(&list), 400, 4002),
        (mcp(reqwest::Method::DELETE), 400, 4002),
        (
            mcp(reqwest::Method::GET).header("mcp-session-id", "nope"),
            404,
            4007,
        ),
        (
            mcp(reqwest::Method::POST).json(&json!({"jsonrpc": "2.0"})),
            400,
            4002,
        ),
    ];
    for (request, status, code) in cases {
        let reply = request.send().await.unwrap();
        assert_eq!(reply.status(), status);
        assert_eq!(
            reply.headers()["content-type"].to_str().unwrap(),
            "application/json"
        );
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["code"], code, "{body}");
    }
    let refused = client
        .post(format!("{}/mcp", h.url))
        .header("accept", "application/json")
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 406);
    assert!(
        refused.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
}

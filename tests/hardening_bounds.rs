//! Issue 33, tried as an attacker would: every resource a caller or a guest can make the
//! host hold has a bound. Each test drives past one bound from outside against a real host
//! (real HTTP, real components) and shows the bound holds and the host keeps answering
//! `/healthz` within a second. The rows of SECURITY.md's resource ledger name these tests.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wharf_integration_tests::{TestHost, bundled, start, start_with};

/// The tests here run one at a time: several measure the process's resident memory, which
/// another test's allocations would blur.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `/healthz` answers 200 within a second, asked from `from` (a loopback address other
/// than the attacker's, as a well-behaved tenant's machine is another peer).
async fn healthy_from(h: &TestHost, from: &str) {
    let client = reqwest::Client::builder()
        .local_address(from.parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let started = Instant::now();
    let reply = client
        .get(format!("{}/healthz", h.url))
        .send()
        .await
        .expect("/healthz answers within a second");
    assert_eq!(reply.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(1));
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})
}

/// Opens an MCP session; its id.
async fn open_mcp(client: &reqwest::Client, url: &str) -> String {
    let reply = client
        .post(format!("{url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let id = reply.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = reply.bytes().await;
    id
}

/// The HTTP status `tools/list` gets in MCP session `id`.
async fn list_in(client: &reqwest::Client, url: &str, id: &str) -> u16 {
    client
        .post(format!("{url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Finding 1: a flood of `initialize` holds at most the per-token cap of MCP sessions; the
/// oldest idle ones are ended to make room, the newest keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_flood_holds_at_most_the_per_token_cap() {
    let _serial = SERIAL.lock().await;
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.connections.max_mcp_sessions = 16;
        s.connections.max_mcp_sessions_per_token = 8;
    })
    .await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(open_mcp(&client, &h.url).await);
    }
    let mut live = 0;
    for id in &ids {
        if list_in(&client, &h.url, id).await == 200 {
            live += 1;
        }
    }
    assert_eq!(live, 8, "exactly the cap's worth of sessions is still live");
    assert_eq!(
        list_in(&client, &h.url, &ids[39]).await,
        200,
        "the newest lives"
    );
    assert_ne!(
        list_in(&client, &h.url, &ids[0]).await,
        200,
        "the oldest was ended"
    );
    healthy_from(&h, "127.0.0.2").await;
}

/// Finding 1 at the default caps: 3,000 `initialize` requests leave the host's memory
/// within the caps' worth (256 sessions of ~83 KiB), not the flood's (~250 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_flood_at_the_default_caps_keeps_memory_flat() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("echo", bundled("echo"))]).await;
    let client = reqwest::Client::new();
    for _ in 0..300 {
        open_mcp(&client, &h.url).await;
    }
    let before = rss_kib();
    for _ in 0..3000 {
        open_mcp(&client, &h.url).await;
    }
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 96,
        "3,000 more sessions grew the host by {grown_mib} MiB"
    );
    healthy_from(&h, "127.0.0.2").await;
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Finding 2: connections that send half a request line are closed after the header-read
/// timeout; past the per-peer cap a connection is answered 503 at once; another peer's
/// `/healthz` answers meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_are_cut_and_capped_per_peer() {
    let _serial = SERIAL.lock().await;
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.connections.max = 64;
        s.connections.max_per_peer = 32;
        s.connections.header_read_timeout_ms = 1_000;
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..32 {
        let mut c = TcpStream::connect(h.addr).await.unwrap();
        c.write_all(b"GET /healthz HT").await.unwrap();
        slow.push(c);
    }
    // The 33rd from the same peer: refused with a whole HTTP answer.
    let mut over = TcpStream::connect(h.addr).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(2), over.read_to_string(&mut answer))
        .await
        .expect("the refusal comes at once")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    healthy_from(&h, "127.0.0.2").await;
    // Each slow connection is closed by the host after about a second.
    let started = Instant::now();
    for c in &mut slow {
        let mut buf = [0u8; 256];
        let read = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(_)) | Ok(Err(_))),
            "a slow connection was still open after {:?}",
            started.elapsed()
        );
    }
    // And a kept-alive connection idle past the timeout is closed too.
    let mut idle = TcpStream::connect(h.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match idle.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle kept-alive connection stayed open");
    healthy_from(&h, "127.0.0.1").await;
}

/// Finding 3: a tool schema whose `pattern` needs a backtracking engine is refused at load
/// (naming why), so no call can run it on a worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backtracking_schema_pattern_is_refused_at_load() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("echo", bundled("echo"))]).await;
    let Err(refused) = h
        .wharf
        .load_backend("backtracker", bundled("backtracker"))
        .await
    else {
        panic!("the backend loaded");
    };
    let text = format!("{refused:#}");
    assert!(text.contains("match"), "names the tool: {text}");
    assert!(text.contains("backtracking"), "says why: {text}");
    healthy_from(&h, "127.0.0.2").await;
}

/// Finding 3, the other half: arguments too large to validate inline are validated on a
/// blocking thread under the call's deadline, and the host answers others meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_arguments_are_validated_off_the_workers() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("echo", bundled("echo"))]).await;
    // 3 MB of arguments: validated on a blocking thread; the host answers others meanwhile.
    let text = "a".repeat(3_000_000);
    let url = h.url.clone();
    let big = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/call"))
            .json(&json!({"tool": "echo:say", "args": {"text": text}}))
            .send()
            .await
            .unwrap()
            .status()
    });
    healthy_from(&h, "127.0.0.2").await;
    assert_eq!(big.await.unwrap(), 200);
}

/// A server that accepts connections, holds each for `hold`, then answers 200; it counts
/// how many it held at once.
async fn holding_server(hold: Duration) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let most = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let (most2, now2) = (most.clone(), now.clone());
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let (most, now) = (most2.clone(), now2.clone());
            tokio::spawn(async move {
                let open = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(open, Ordering::SeqCst);
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf).await;
                tokio::time::sleep(hold).await;
                let _ = c
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                now.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (port, most)
}

/// Finding 4: a guest firing 1,500 outbound requests without awaiting them holds at most
/// its per-call cap of sockets; the rest fail at once with `connection-limit-reached`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_flooding_outbound_http_holds_at_most_its_cap() {
    let _serial = SERIAL.lock().await;
    let (port, most) = holding_server(Duration::from_millis(1500)).await;
    let mut probe = bundled("probe");
    probe.grants.http_hosts = vec!["127.0.0.1:*".into()];
    probe.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    probe.grants.max_http_in_flight_per_call = 16;
    let h = start(vec![("probe", probe)]).await;
    let url = h.url.clone();
    let flood = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{url}/v1/call"))
            .json(&json!({"tool": "probe:flood", "args": {"url": format!("http://127.0.0.1:{port}/"), "count": 1500}}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    healthy_from(&h, "127.0.0.2").await;
    let reply = flood.await.unwrap();
    let result = &reply["data"]["result"];
    assert_eq!(result["ok"], 16, "{reply}");
    assert_eq!(
        result["errors"]["ErrorCode::ConnectionLimitReached"], 1484,
        "the rest refused at once: {reply}"
    );
    assert!(
        most.load(Ordering::SeqCst) <= 16,
        "the server saw {} at once",
        most.load(Ordering::SeqCst)
    );
}

/// Finding 5 and the batch defaults: a client's `trace_id` is bounded before it is copied
/// into any line, a host without `[quotas]` still bounds a batch, and a batch that failed
/// only on the caller's errors is a 4xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_trace_ids_are_bounded_without_quotas() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("echo", bundled("echo"))]).await;
    let ping = json!({"action": "echo:ping", "params": {}});
    let huge = h
        .post(
            "/api/v1/execute/batch",
            json!({"worker_id": "w", "actions": [ping], "trace_id": "t".repeat(1_000_000)}),
        )
        .await;
    assert_eq!((huge.status, huge.code()), (400, 4004), "{}", huge.body);
    let odd = h
        .post(
            "/api/v1/execute",
            json!({"worker_id": "w", "action": "echo:ping", "params": {}, "trace_id": "a\nforged line"}),
        )
        .await;
    assert_eq!(odd.code(), 4004, "{}", odd.body);
    let fine = h
        .post(
            "/api/v1/execute",
            json!({"worker_id": "w", "action": "echo:ping", "params": {}, "trace_id": "req-42.a:b"}),
        )
        .await;
    assert_eq!(fine.code(), 0, "{}", fine.body);
    assert_eq!(fine.body["meta"]["trace_id"], "req-42.a:b");

    let actions: Vec<Value> = (0..1001).map(|_| ping.clone()).collect();
    let big = h
        .post(
            "/api/v1/execute/batch",
            json!({"worker_id": "w", "actions": actions, "parallel": true}),
        )
        .await;
    assert_eq!((big.status, big.code()), (403, 4030), "{}", big.body);
    assert_eq!(big.body["data"]["limit"], 1000);
    healthy_from(&h, "127.0.0.2").await;
}

/// The secure defaults: with no `[quotas]`, `ttl_seconds: 0` is not forever and a session
/// has a running-lifetime ceiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_finite_without_quotas() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("scratchpad", bundled("scratchpad"))]).await;
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "ttl_seconds": 0}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let expires = r.body["data"]["expires_at_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no idle expiry: {}", r.body));
    assert!(expires <= now_ms + 86_400_000 + 60_000, "{}", r.body);
}

/// Finding 16: camelCase secret keys are hidden in `/v1/backends`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn camel_case_secrets_are_hidden_from_readers() {
    let _serial = SERIAL.lock().await;
    let mut echo = bundled("echo");
    echo.config = Some(
        toml::from_str(
            "masterKey = 'm-1'\nencryptionKey = 'e-2'\nauthKey = 'a-3'\nsessionKey = 's-4'\nbearer = 'b-5'\njwt = 'j-6'\ngreeting = 'hello'\n",
        )
        .unwrap(),
    );
    let h = start_with(vec![("echo", echo)], |s| {
        s.auth.tokens = vec![wharf_integration_tests::admin_token("ops-secret")];
    })
    .await;
    let listed: Value = reqwest::Client::new()
        .get(format!("{}/v1/backends", h.url))
        .bearer_auth("ops-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = listed["data"]["backends"][0]["config"].to_string();
    for secret in ["m-1", "e-2", "a-3", "s-4", "b-5", "j-6"] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    assert!(text.contains("hello"), "{text}");
}

/// A raw request's status line and JSON body, read within `within`.
async fn raw_reply(tcp: &mut TcpStream, within: Duration) -> (u16, Value) {
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(within, tcp.read_to_end(&mut reply)).await;
    wharf_integration_tests::raw_http_reply(&reply)
}

/// Starts a PUT to the files route that declares `declared` bytes and sends none.
async fn start_upload(h: &TestHost, session: &str, declared: u64) -> TcpStream {
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "PUT /v1/sessions/{session}/files?path=/tmp/up HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n",
        h.addr
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

async fn docker_session(h: &TestHost) -> String {
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": "boundsdocker", "key": "bounds"}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

/// Finding 10: an upload into a session without a sandbox is refused before a byte is
/// spooled, and a tenant's uploads in progress together stay within its spool budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_refused_before_spooling() {
    let _serial = SERIAL.lock().await;
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    let h = start_with(
        vec![
            ("boundsdocker", wharf_integration_tests::docker_provider()),
            ("scratchpad", bundled("scratchpad")),
        ],
        |s| {
            s.max_upload_bytes = 2 << 20;
            s.max_spooled_bytes_per_tenant = 3 << 20;
        },
    )
    .await;
    let pad = h
        .post("/v1/sessions", json!({"backend": "scratchpad"}))
        .await;
    let pad = pad.body["data"]["id"].as_str().unwrap().to_string();
    let mut not_a_sandbox = start_upload(&h, &pad, 1 << 20).await;
    let (status, body) = raw_reply(&mut not_a_sandbox, Duration::from_secs(5)).await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4002)), "{body}");

    let s = docker_session(&h).await;
    let first = start_upload(&h, &s, 2 << 20).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = start_upload(&h, &s, 2 << 20).await;
    let (status, body) = raw_reply(&mut second, Duration::from_secs(5)).await;
    assert_eq!((status, body["code"].as_u64()), (429, Some(4290)), "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("max_spooled_bytes_per_tenant")
    );
    drop(first);
    // The first one's reservation is given back when it ends.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let put = reqwest::Client::new()
        .put(format!("{}/v1/sessions/{s}/files?path=/tmp/ok", h.url))
        .header("content-type", "application/octet-stream")
        .body(vec![b'x'; 1 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    healthy_from(&h, "127.0.0.2").await;
    // The sandbox goes with its session (a test host's containers outlive it otherwise).
    assert_eq!(h.delete(&format!("/v1/sessions/{s}")).await.code(), 0);
}

/// Finding 9: a client that starts a download and stops reading gives the session back
/// after the read timeout, so `DELETE` answers and the sandbox goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_download_gives_the_session_back() {
    let _serial = SERIAL.lock().await;
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    let h = start_with(
        vec![("boundsdocker", wharf_integration_tests::docker_provider())],
        |s| s.upload_read_timeout_ms = 1_000,
    )
    .await;
    let s = docker_session(&h).await;
    let made = h
        .call_in(
            &s,
            "boundsdocker:run_command",
            json!({"command": "head -c 67108864 /dev/zero > big.bin && echo done"}),
        )
        .await;
    assert_eq!(made.code(), 0, "{}", made.body);
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    tcp.write_all(
        format!(
            "GET /v1/sessions/{s}/files?path=big.bin HTTP/1.1\r\nHost: {}\r\n\r\n",
            h.addr
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = [0u8; 512];
    let n = tcp.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    // The client reads no more; the host's buffers fill and its stream stalls.
    let started = Instant::now();
    let deleted = tokio::time::timeout(
        Duration::from_secs(20),
        h.delete(&format!("/v1/sessions/{s}")),
    )
    .await
    .expect("DELETE answers while the stalled download is still open");
    assert_eq!(deleted.code(), 0, "{}", deleted.body);
    assert!(started.elapsed() < Duration::from_secs(20));
    healthy_from(&h, "127.0.0.2").await;
    drop(tcp);
}

/// Finding 14: concurrent sets into one kv scope cannot together overshoot its 4 MiB
/// quota (the check and the write run one at a time per scope on a node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_kv_sets_stay_within_the_scope_quota() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("probe", bundled("probe"))]).await;
    let set = |key: String| {
        let url = h.url.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/call"))
                .json(&json!({"tool": "probe:kv", "args": {"scope": "backend", "key": key, "value": "x", "repeat": 65_000}}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    for i in 0..60 {
        let r = set(format!("k{i:02}")).await;
        assert_eq!(r["code"], 0, "{r}");
    }
    let racing = (60..92).map(|i| set(format!("k{i:02}")));
    let answers = futures::future::join_all(racing).await;
    let accepted = answers.iter().filter(|r| r["code"] == 0).count();
    let listed = h
        .call("probe:kv", json!({"scope": "backend", "key": "k00"}))
        .await;
    let keys = listed.body["data"]["result"]["keys"]
        .as_array()
        .unwrap()
        .len();
    // 65,003 bytes a key: 64 fit in 4 MiB.
    assert!(
        keys <= 64,
        "{keys} keys stored ({accepted} racing sets accepted)"
    );
    assert_eq!(accepted, keys - 60, "every accepted set is stored");
}

/// Why `name` is listed as rejected in `/v1/backends` (empty if it is not, after 10 s).
async fn rejection_reason(h: &TestHost, name: &str) -> String {
    for _ in 0..100 {
        let listed = h.get("/v1/backends").await;
        if let Some(r) = listed.body["data"]["rejected"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == name))
        {
            return r["reason"].as_str().unwrap_or_default().to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    String::new()
}

/// Finding 13: a 1 GiB sparse `NAME.toml` beside a good `NAME.wasm`, and a 1 GiB sparse
/// `NAME.wasm`, in the plugins directory are refused (saying why) without the host reading
/// them whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_sparse_plugins_files_are_refused_unread() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let sparse = |name: &str| {
        let file = std::fs::File::create(dir.path().join(name)).unwrap();
        file.set_len(1 << 30).unwrap();
    };
    sparse("big.toml");
    std::fs::write(
        dir.path().join("big.wasm"),
        wharf::bundled::wasm("echo").unwrap(),
    )
    .unwrap();
    sparse("huge.wasm");
    let before = rss_kib();
    let _watcher = wharf::hot_reload::watch(h.wharf.clone(), dir.path().to_path_buf())
        .await
        .unwrap();
    for (name, said) in [
        ("big", "over 1048576 bytes"),
        ("huge", "over 268435456 bytes"),
    ] {
        let reason = rejection_reason(&h, name).await;
        assert!(reason.contains(said), "{name} rejected: {reason:?}");
        assert!(h.backend_info(name).await.is_null());
    }
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 256,
        "reading them grew the host by {grown_mib} MiB"
    );
    healthy_from(&h, "127.0.0.2").await;
}

/// Finding 11: a session's data is capped at 64 KiB: a write that would grow it past the
/// cap fails and leaves the session as it was, so neither the row, the cache nor a listing
/// holds what a guest chooses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_data_is_capped() {
    let _serial = SERIAL.lock().await;
    let h = start(vec![("scratchpad", bundled("scratchpad"))]).await;
    let s = h
        .post("/v1/sessions", json!({"backend": "scratchpad"}))
        .await;
    let s = s.body["data"]["id"].as_str().unwrap().to_string();
    let note = "n".repeat(40_000);
    let first = h
        .call_in(&s, "scratchpad:write", json!({"note": note}))
        .await;
    assert_eq!(first.code(), 0, "{}", first.body);
    let second = h
        .call_in(&s, "scratchpad:write", json!({"note": note}))
        .await;
    assert_eq!(second.code(), 5000, "{}", second.body);
    assert!(
        second.body["message"]
            .as_str()
            .unwrap()
            .contains("session data"),
        "{}",
        second.body
    );
    let read = h.call_in(&s, "scratchpad:read", json!({})).await;
    assert_eq!(
        read.body["data"]["result"]["notes"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "the session is unchanged"
    );
    let listed = h.get("/v1/sessions").await;
    assert!(listed.body.to_string().len() < 100_000);
}

/// A hostile registry on loopback: `/v2/` answers 200 (no auth), and the manifest of tag
/// `huge` is an endless stream, of `moved` a redirect to another address (with a body that
/// must never be shown), of `slow` one byte a second.
async fn hostile_registry() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let manifest = "content-type: application/vnd.oci.image.manifest.v1+json\r\n";
                if line.contains("/manifests/huge") {
                    let _ = c
                        .write_all(
                            format!("HTTP/1.1 200 OK\r\n{manifest}connection: close\r\n\r\n")
                                .as_bytes(),
                        )
                        .await;
                    let chunk = vec![b' '; 1 << 20];
                    for _ in 0..1024 {
                        if c.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                } else if line.contains("/manifests/moved") {
                    let body = "secret-body-from-the-registry";
                    let _ = c
                        .write_all(format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.2:{port}/v2/evil/x/manifests/huge\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes())
                        .await;
                } else if line.contains("/manifests/slow") {
                    let _ = c
                        .write_all(
                            format!("HTTP/1.1 200 OK\r\n{manifest}content-length: 1000\r\n\r\n")
                                .as_bytes(),
                        )
                        .await;
                    for _ in 0..1000 {
                        if c.write_all(b" ").await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                } else {
                    let _ = c
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                        .await;
                }
            });
        }
    });
    port
}

/// Findings 6, 7 and 8: a registry that sends an endless manifest, redirects it elsewhere
/// or trickles it is refused within the manifest's cap and deadline, and nothing it wrote
/// reaches the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_registry_is_bounded() {
    let _serial = SERIAL.lock().await;
    let port = hostile_registry().await;
    let h = start(vec![]).await;
    let load = |tag: &str| {
        let wharf = h.wharf.clone();
        let path = format!("oci://127.0.0.1:{port}/evil/x:{tag}");
        async move {
            match wharf
                .load_backend("evil", wharf::config::BackendConfig::at(path))
                .await
            {
                Ok(_) => panic!("a hostile registry's component loaded"),
                Err(e) => format!("{e:#}"),
            }
        }
    };
    let before = rss_kib();
    let huge = load("huge").await;
    assert!(huge.contains("over 4194304 bytes"), "{huge}");
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 256,
        "an endless manifest grew the host by {grown_mib} MiB"
    );

    let moved = load("moved").await;
    assert!(moved.contains("redirected"), "{moved}");
    assert!(!moved.contains("secret-body"), "{moved}");

    let started = Instant::now();
    let slow = tokio::time::timeout(Duration::from_secs(60), load("slow"))
        .await
        .expect("a trickling registry is given up on");
    assert!(slow.contains("within 30 s"), "{slow}");
    assert!(started.elapsed() < Duration::from_secs(45));
    healthy_from(&h, "127.0.0.2").await;
}

/// Finding 15: a token in an outbound URL's path never reaches the audit log: the
/// `outbound_http` line carries the path's length and digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_an_outbound_path_stays_out_of_the_audit_log() {
    let _serial = SERIAL.lock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let config = dir.path().join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = {:?}\n\n[backends.probe]\npath = \"bundled:probe\"\n\
             [backends.probe.grants]\nhttp_hosts = [\"127.0.0.1:*\"]\nhttp_private_cidrs = [\"127.0.0.0/8\"]\n\n\
             [audit]\npath = {audit:?}\n",
            dir.path().join("data"),
        ),
    )
    .unwrap();
    let host = wharf_integration_tests::processes::WharfProcess::start(&config);
    let secret = "TOKEN".repeat(30);
    let reply: Value = reqwest::Client::new()
        .post(format!("{}/v1/call", host.url))
        .json(&json!({"tool": "probe:fetch", "args": {"url": format!("http://127.0.0.1:{port}/bot{secret}/send")}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    let mut written = String::new();
    for _ in 0..50 {
        written = std::fs::read_to_string(&audit).unwrap_or_default();
        if written.contains("outbound_http") && written.contains("tool_call") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(written.contains("outbound_http"), "{written}");
    assert!(
        !written.contains(&secret[..20]),
        "the token reached the audit log: {written}"
    );
    assert!(written.contains("sha256"), "{written}");
}

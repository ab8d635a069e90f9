//! The HTTP edge and tenancy, tried as an attacker would (issue 9): a web page reaching a
//! loopback host (foreign `Host`, cross-origin `Origin`, `text/plain` and form bodies) on
//! REST, `/api/v1` and `/mcp`; a token whose allowlist does not cover a sandbox moving its
//! files; a token named `*`; another token presenting an MCP session id; `/metrics` without
//! a token; backend config shown to readers, nested secrets and URL credentials; symlinks
//! in the plugins directory. The host answers `/healthz` after each.

use reqwest::RequestBuilder;
use serde_json::{Value, json};
use wharf::config::{TokenConfig, TokenScope};
use wharf_integration_tests::{
    TestHost, bundled, docker_provider, docker_ready, start, start_with,
};

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

/// Status and JSON body (or `{"raw": text}`).
async fn send(request: RequestBuilder) -> (u16, Value) {
    let reply = request.send().await.expect("the host answers");
    let status = reply.status().as_u16();
    let text = reply.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(json!({ "raw": text })),
    )
}

async fn assert_healthy(h: &TestHost) {
    assert_eq!(h.get("/healthz").await.status, 200, "the host stays up");
}

fn mcp_initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

/// The JSON routes of the three interfaces, each with a body it would accept.
fn json_routes() -> Vec<(&'static str, Value)> {
    vec![
        ("/v1/call", json!({"tool": "echo:ping"})),
        ("/v1/sessions", json!({"backend": "scratchpad"})),
        (
            "/api/v1/execute",
            json!({"worker_id": "w", "action": "echo:ping", "params": {}}),
        ),
        ("/mcp", mcp_initialize()),
    ]
}

fn post(h: &TestHost, path: &str) -> RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}{path}", h.url))
        .header("accept", "application/json, text/event-stream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_cannot_reach_a_loopback_host() {
    let h = start(vec![
        ("echo", bundled("echo")),
        ("scratchpad", bundled("scratchpad")),
    ])
    .await;
    let port = h.addr.port();
    for (path, body) in json_routes() {
        // DNS rebinding: the page's own name, resolved to 127.0.0.1.
        for host in [format!("attacker.example:{port}"), "evil.test".to_string()] {
            let (status, reply) = send(post(&h, path).header("host", &host).json(&body)).await;
            assert_eq!(status, 403, "POST {path} with Host {host}: {reply}");
            assert_eq!(reply["code"], 4030, "POST {path} with Host {host}");
        }
        // CSRF: a cross-origin page posting to the right host.
        for origin in ["http://attacker.example", "null", "http://localhost:1"] {
            let (status, reply) = send(post(&h, path).header("origin", origin).json(&body)).await;
            assert_eq!(status, 403, "POST {path} from Origin {origin}: {reply}");
            assert_eq!(reply["code"], 4030);
        }
        // What a form or `fetch` with a string body sends without a preflight.
        for media in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            let (status, reply) = send(
                post(&h, path)
                    .header("content-type", media)
                    .body(body.to_string()),
            )
            .await;
            assert_eq!(status, 415, "POST {path} as {media}: {reply}");
            assert_eq!(reply["code"], 4150, "POST {path} as {media}");
        }
    }
    let (status, reply) = send(
        reqwest::Client::new()
            .get(format!("{}/v1/tools", h.url))
            .header("host", "attacker.example"),
    )
    .await;
    assert_eq!(status, 403, "GET with a foreign Host: {reply}");

    // The host's own names and origin still work, and so do bodiless compat POSTs.
    let own = format!("http://localhost:{port}");
    let (status, reply) = send(
        post(&h, "/v1/call")
            .header("host", format!("localhost:{port}"))
            .header("origin", &own)
            .header("content-type", "application/json; charset=utf-8")
            .body(json!({"tool": "echo:ping"}).to_string()),
    )
    .await;
    assert_eq!((status, reply["code"].clone()), (200, json!(0)), "{reply}");
    let (status, reply) = send(post(&h, "/api/v1/session/list")).await;
    assert_ne!(
        status, 415,
        "a bodiless POST is not a body of the wrong type: {reply}"
    );
    assert_healthy(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_named_star_sees_only_its_own_sessions() {
    let h = start_with(vec![("scratchpad", bundled("scratchpad"))], |s| {
        // Built in code, past the config check that refuses the name.
        s.auth.tokens = vec![
            token("agent", &[TokenScope::Read, TokenScope::Call], None),
            token("*", &[TokenScope::Read, TokenScope::Call], None),
        ];
    })
    .await;
    let as_token = |t: &str, r: RequestBuilder| r.bearer_auth(format!("secret-{t}"));
    let (_, created) = send(as_token(
        "agent",
        reqwest::Client::new()
            .post(format!("{}/v1/sessions", h.url))
            .json(&json!({"backend": "scratchpad", "key": "private"})),
    ))
    .await;
    let id = created["data"]["id"]
        .as_str()
        .expect("session id")
        .to_string();
    let (_, listed) = send(as_token(
        "*",
        reqwest::Client::new().get(format!("{}/v1/sessions", h.url)),
    ))
    .await;
    assert_eq!(listed["code"], 0, "{listed}");
    assert!(
        !listed.to_string().contains(&id),
        "a token named `*` lists another tenant's session: {listed}"
    );
    let (status, got) = send(as_token(
        "*",
        reqwest::Client::new().get(format!("{}/v1/sessions/{id}", h.url)),
    ))
    .await;
    assert_eq!((status, got["code"].clone()), (404, json!(4007)), "{got}");
    let (_, call) = send(as_token(
        "*",
        reqwest::Client::new()
            .post(format!("{}/v1/call", h.url))
            .json(&json!({"tool": "scratchpad:read", "session_id": id})),
    ))
    .await;
    assert_eq!(call["code"], 4007, "{call}");

    let config = "[[auth.tokens]]\nname = \"*\"\nvalue = \"v\"\nscopes = [\"read\"]\n";
    let refused = wharf::config::WharfConfig::parse(config, |_| None).expect_err("refused");
    assert!(format!("{refused:#}").contains("reserved"), "{refused:#}");
    assert_healthy(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_answers_only_the_token_that_opened_it() {
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![
            token("alice", &[TokenScope::Read, TokenScope::Call], None),
            token("mallory", &[TokenScope::Read, TokenScope::Call], None),
        ];
    })
    .await;
    let mcp = |t: &str| post(&h, "/mcp").bearer_auth(format!("secret-{t}"));
    let opened = mcp("alice").json(&mcp_initialize()).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _) = send(
        mcp("alice")
            .header("mcp-session-id", &session)
            .json(&initialized),
    )
    .await;
    assert!(status < 300, "alice finishes the handshake: {status}");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo_ping", "arguments": {}}});
    let (status, reply) = send(
        mcp("mallory")
            .header("mcp-session-id", &session)
            .json(&call),
    )
    .await;
    assert_eq!(
        status, 404,
        "another token rides alice's MCP session: {reply}"
    );
    assert_eq!(reply["code"], 4007);
    let (status, reply) = send(
        reqwest::Client::new()
            .delete(format!("{}/mcp", h.url))
            .bearer_auth("secret-mallory")
            .header("mcp-session-id", &session),
    )
    .await;
    assert_eq!(
        status, 404,
        "another token ends alice's MCP session: {reply}"
    );

    let (status, reply) = send(mcp("alice").header("mcp-session-id", &session).json(&call)).await;
    assert_eq!(status, 200, "alice's session still serves her: {reply}");
    assert!(reply.to_string().contains("pong"), "{reply}");
    assert_healthy(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_the_read_scope_when_tokens_exist() {
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![
            token("reader", &[TokenScope::Read], None),
            token("caller", &[TokenScope::Call], None),
        ];
    })
    .await;
    let metrics = || reqwest::Client::new().get(format!("{}/metrics", h.url));
    let (status, reply) = send(metrics()).await;
    assert_eq!(
        (status, reply["code"].clone()),
        (401, json!(4010)),
        "{reply}"
    );
    let (status, _) = send(metrics().bearer_auth("secret-caller")).await;
    assert_eq!(status, 403, "a token without `read`");
    let reply = metrics().bearer_auth("secret-reader").send().await.unwrap();
    assert_eq!(reply.status(), 200);
    assert!(reply.text().await.unwrap().contains("wharf_"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_config_is_for_admins_and_redacted_as_whole_subtrees() {
    let mut echo = bundled("echo");
    echo.config = Some(
        toml::from_str(
            r#"
            greeting = "hello"
            upstream = "https://svc:leak-url@example.com/v1"
            [db]
            host = "db.internal"
            pass = "leak-nested"
            [credentials]
            user = "leak-tree"
            "#,
        )
        .unwrap(),
    );
    let h = start_with(vec![("echo", echo)], |s| {
        s.auth.tokens = vec![
            token("reader", &[TokenScope::Read], None),
            token("ops", &[TokenScope::Admin], None),
        ];
    })
    .await;
    let backends = |t: &str| {
        reqwest::Client::new()
            .get(format!("{}/v1/backends", h.url))
            .bearer_auth(format!("secret-{t}"))
    };
    let (_, as_reader) = send(backends("reader")).await;
    let entry = &as_reader["data"]["backends"][0];
    assert_eq!(entry["name"], "echo", "{as_reader}");
    assert!(
        entry.get("config").is_none(),
        "a reader sees the operator's config: {entry}"
    );
    let (_, as_admin) = send(backends("ops")).await;
    let config = &as_admin["data"]["backends"][0]["config"];
    let text = as_admin.to_string();
    assert!(
        !text.contains("leak-"),
        "a secret reached the admin: {config}"
    );
    assert_eq!(config["greeting"], "hello", "{config}");
    assert_eq!(config["db"]["host"], "db.internal", "{config}");
    assert_eq!(config["db"]["pass"], "***", "{config}");
    assert_eq!(config["credentials"], "***", "{config}");
    assert_eq!(config["upstream"], "https://svc:***@example.com/v1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_in_the_plugins_dir_are_refused_without_leaking_their_target() {
    let h = start_with(vec![], |s| {
        s.auth.tokens = vec![token("reader", &[TokenScope::Read], None)];
    })
    .await;
    let outside = tempfile::tempdir().unwrap();
    let host_file = outside.path().join("shadow");
    std::fs::write(&host_file, "root:$6$SECRET-FIRST-LINE:0:0\nsecond\n").unwrap();
    let echo_outside = outside.path().join("echo.wasm");
    std::fs::write(&echo_outside, wharf::bundled::wasm("echo").unwrap()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let echo = wharf::bundled::wasm("echo").unwrap();
    std::fs::write(dir.path().join("sidecar.wasm"), echo).unwrap();
    std::os::unix::fs::symlink(&host_file, dir.path().join("sidecar.toml")).unwrap();
    std::os::unix::fs::symlink(&echo_outside, dir.path().join("linked.wasm")).unwrap();
    std::fs::write(dir.path().join("garbled.wasm"), echo).unwrap();
    std::fs::write(
        dir.path().join("garbled.toml"),
        "limits = { pool_max = 1 }\nSECRET-IN-FILE := 1\n",
    )
    .unwrap();
    let _watcher = wharf::hot_reload::watch(h.wharf.clone(), dir.path().to_path_buf())
        .await
        .unwrap();

    let (_, listed) = send(
        reqwest::Client::new()
            .get(format!("{}/v1/backends", h.url))
            .bearer_auth("secret-reader"),
    )
    .await;
    let text = listed.to_string();
    assert!(
        !text.contains("SECRET-"),
        "a file's content reached a reader: {listed}"
    );
    let loaded: Vec<&str> = listed["data"]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert!(
        !loaded.contains(&"sidecar") && !loaded.contains(&"linked"),
        "loaded through a symlink: {loaded:?}"
    );
    let reason = |name: &str| {
        listed["data"]["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["reason"].as_str().unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("`{name}` is not listed as rejected: {listed}"))
    };
    assert!(reason("sidecar").contains("symbolic link"), "{listed}");
    assert!(reason("linked").contains("symbolic link"), "{listed}");
    assert!(reason("garbled").contains("line 2"), "{listed}");
    assert_healthy(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_route_honours_the_token_allowlist() {
    if !docker_ready() {
        return;
    }
    let h = start_with(
        vec![("docker", docker_provider()), ("echo", bundled("echo"))],
        |s| {
            s.auth.tokens = vec![
                token("agent", &[TokenScope::Read, TokenScope::Call], None),
                // An admin sees every tenant's sessions, but its allowlist is echo only.
                token("echo-ops", &[TokenScope::Admin], Some(&["echo"])),
            ];
        },
    )
    .await;
    let as_token = |t: &str, r: RequestBuilder| r.bearer_auth(format!("secret-{t}"));
    let client = reqwest::Client::new();
    let (_, created) = send(as_token(
        "agent",
        client
            .post(format!("{}/v1/sessions", h.url))
            .json(&json!({"backend": "docker", "key": format!("edge-{}", uuid::Uuid::new_v4())})),
    ))
    .await;
    let id = created["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    let files = format!("{}/v1/sessions/{id}/files?path=/work/secret.txt", h.url);
    let (status, put) = send(as_token(
        "agent",
        client.put(&files).body("the agent's secret"),
    ))
    .await;
    assert_eq!(status, 200, "{put}");

    let (status, reply) = send(as_token("echo-ops", client.get(&files))).await;
    assert_eq!(
        status, 403,
        "a token limited to echo downloads from docker: {reply}"
    );
    assert_eq!(reply["code"], 4030);
    let (status, reply) = send(as_token("echo-ops", client.put(&files).body("overwritten"))).await;
    assert_eq!(
        status, 403,
        "a token limited to echo uploads to docker: {reply}"
    );
    let (status, _) = send(as_token(
        "echo-ops",
        client.get(format!("{}/v1/sessions/{id}", h.url)),
    ))
    .await;
    assert_eq!(
        status, 403,
        "a token limited to echo reads a docker session"
    );
    let (status, body) = {
        let r = as_token("agent", client.get(&files)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!((status, body.as_str()), (200, "the agent's secret"));
    send(as_token(
        "agent",
        client.delete(format!("{}/v1/sessions/{id}", h.url)),
    ))
    .await;
    assert_healthy(&h).await;
}

//! Backend authors: the `tracker` example (written with `#[tools]`, `host::kv` and
//! `wharf_sdk::http`) built by the test and served over REST and MCP; the SDK's WIT kept
//! equal to the repository's; and each answer that has to tell an author the truth (a
//! session tool without a session, a stateless tool given one, a code a backend may not
//! use, a panic, an HTTP grant that is missing).

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceExt, model::CallToolResult};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use wharf::config::BackendConfig;
use wharf_integration_tests::{TestHost, start};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Builds plugins of `plugins/` for wasm32-wasip2 (where the host's build puts them, so a
/// fresh build is a no-op) and returns the `.wasm` of each.
fn build_plugins(names: &[&str]) -> Vec<PathBuf> {
    let target = root().join("target/wasm-plugins");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["build", "--release", "--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(root().join("plugins/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    for name in names {
        cmd.args(["-p", name]);
    }
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_") || key.starts_with("RUSTC") || key == "RUSTFLAGS" {
            cmd.env_remove(&key);
        }
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "building {names:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    names
        .iter()
        .map(|n| target.join(format!("wasm32-wasip2/release/{n}.wasm")))
        .collect()
}

fn at(path: &Path) -> BackendConfig {
    BackendConfig::at(path.display().to_string())
}

/// A loopback HTTP server answering `GET /status` with `upstream ok`.
async fn upstream() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route("/status", axum::routing::get(|| async { "upstream ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn session(h: &TestHost, backend: &str, key: &str) -> String {
    let r = h
        .post("/v1/sessions", json!({"backend": backend, "key": key}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().expect("id").to_string()
}

fn result(r: &wharf_integration_tests::Reply) -> &Value {
    assert_eq!(r.code(), 0, "{}", r.body);
    &r.body["data"]["result"]
}

#[test]
fn the_sdk_carries_the_repository_wit() {
    fn files(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read wit dir") {
            let path = entry.expect("entry").path();
            // The frozen older contract stays in the repository only.
            if path.file_name().is_some_and(|n| n == "wharf-plugin@0.1.0") {
                continue;
            }
            if path.is_dir() {
                files(&path, base, out);
            } else {
                out.push(path.strip_prefix(base).expect("prefix").to_path_buf());
            }
        }
    }
    let repo = root().join("wit");
    let mut a = Vec::new();
    files(&repo, &repo, &mut a);
    a.sort();
    // The Rust crate's copy and the Python package's: each travels with its SDK.
    for copy in ["sdk/wit", "sdk/python/wharf_sdk/wit"] {
        let sdk = root().join(copy);
        assert!(
            !std::fs::symlink_metadata(&sdk)
                .expect("the SDK's wit")
                .file_type()
                .is_symlink(),
            "{copy} must be a real directory: a symlink does not travel with the SDK"
        );
        let mut b = Vec::new();
        files(&sdk, &sdk, &mut b);
        b.sort();
        assert_eq!(
            a, b,
            "{copy} must hold the same files as wit/ (copy them over)"
        );
        for file in &a {
            assert!(
                std::fs::read(repo.join(file)).expect("read")
                    == std::fs::read(sdk.join(file)).expect("read"),
                "{copy}/{} differs from wit/{}: copy wit/ into {copy}/",
                file.display(),
                file.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracker_serves_over_rest() {
    let wasm = tokio::task::spawn_blocking(|| build_plugins(&["tracker"]))
        .await
        .expect("join");
    let addr = upstream().await;
    let url = format!("http://127.0.0.1:{}/status", addr.port());
    let mut granted = at(&wasm[0]);
    granted.grants.http_hosts = vec![format!("127.0.0.1:{}", addr.port())];
    granted.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    let mut name_only = at(&wasm[0]);
    name_only.grants.http_hosts = vec![format!("127.0.0.1:{}", addr.port())];
    let h = start(vec![
        ("tracker", granted),
        ("ungranted", at(&wasm[0])),
        ("nameonly", name_only),
    ])
    .await;

    // The schema comes from the method's parameters, the description from its doc comment.
    let listed = h.get("/v1/tools").await;
    let tools = listed.body["data"]["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {}", listed.body))
    };
    let open = tool("tracker:open");
    assert_eq!(
        open["description"], "Open an issue on this session's board.",
        "{open}"
    );
    assert_eq!(open["input_schema"]["required"], json!(["title"]), "{open}");
    assert_eq!(open["session"], "required", "{open}");
    let list = tool("tracker:list");
    assert!(
        list["input_schema"]["properties"]["open_only"].is_object(),
        "{list}"
    );
    assert_eq!(tool("tracker:stats")["annotations"]["read_only"], true);

    // Two session tools on a board that starts as `{}`.
    let s1 = session(&h, "tracker", "one").await;
    let s2 = session(&h, "tracker", "two").await;
    let first = h
        .call_in(&s1, "tracker:open", json!({"title": "login is slow"}))
        .await;
    let first_id = result(&first)["id"].as_i64().expect("id");
    let second = h
        .call_in(&s2, "tracker:open", json!({"title": "typo"}))
        .await;
    assert_ne!(
        result(&second)["id"].as_i64(),
        Some(first_id),
        "ids are unique across sessions"
    );
    let closed = h
        .call_in(&s1, "tracker:close", json!({"id": first_id}))
        .await;
    assert_eq!(result(&closed)["open"], false);
    let listed = h.call_in(&s1, "tracker:list", json!({})).await;
    assert_eq!(
        result(&listed).as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.body
    );
    let open_only = h
        .call_in(&s1, "tracker:list", json!({"open_only": true}))
        .await;
    assert_eq!(result(&open_only), &json!([]));
    let missing = h.call_in(&s1, "tracker:close", json!({"id": 999})).await;
    assert_eq!(missing.code(), 4006, "{}", missing.body);
    // Unknown fields are refused (the generated argument struct denies them).
    let extra = h
        .call_in(&s1, "tracker:open", json!({"title": "x", "color": "red"}))
        .await;
    assert_ne!(extra.code(), 0, "{}", extra.body);

    // The stateless kv counter sees both sessions' issues.
    let stats = h.call("tracker:stats", json!({})).await;
    assert_eq!(result(&stats)["opened"], 2);

    // One HTTP call to the loopback server, granted by name and address.
    let fetched = h.call("tracker:upstream", json!({"url": url})).await;
    assert_eq!(result(&fetched)["status"], 200);
    assert_eq!(result(&fetched)["body"], "upstream ok");
    // Without grants the answer names the grant that is missing.
    let denied = h.call("ungranted:upstream", json!({"url": url})).await;
    assert_eq!(denied.code(), 4030, "{}", denied.body);
    assert!(
        denied.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("http_hosts")),
        "{}",
        denied.body
    );
    let loopback = h.call("nameonly:upstream", json!({"url": url})).await;
    assert_eq!(loopback.code(), 4030, "{}", loopback.body);
    assert!(
        loopback.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("http_private_cidrs")),
        "{}",
        loopback.body
    );
}

fn mcp_params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().expect("object"))
}

/// The result of a successful call (its text content, parsed), checked against its
/// structured content: the result itself when it is an object, else `{"result": …}` (MCP's
/// structured content is an object).
fn structured(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let text = r
        .content
        .iter()
        .find_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_else(|| panic!("no content: {r:?}"));
    let result: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    let expected = if result.is_object() {
        result.clone()
    } else {
        json!({ "result": result })
    };
    assert_eq!(r.structured_content.as_ref(), Some(&expected), "{r:?}");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracker_serves_over_mcp() {
    let wasm = tokio::task::spawn_blocking(|| build_plugins(&["tracker"]))
        .await
        .expect("join");
    let h = start(vec![("tracker", at(&wasm[0]))]).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url)),
    );
    let client = ().serve(transport).await.expect("mcp client");
    let tools = client.list_all_tools().await.expect("tools/list");
    let open = tools
        .iter()
        .find(|t| t.name == "tracker_open")
        .expect("tracker_open listed");
    assert_eq!(
        open.description.as_deref(),
        Some("Open an issue on this session's board.")
    );
    let stats = tools
        .iter()
        .find(|t| t.name == "tracker_stats")
        .expect("tracker_stats listed");
    assert_eq!(
        stats.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );

    // The MCP session is the tracker session: what `open` wrote, `list` reads.
    let issue = client
        .call_tool(mcp_params("tracker_open", json!({"title": "from mcp"})))
        .await
        .expect("call");
    let issue = structured(&issue);
    let listed = client
        .call_tool(mcp_params("tracker_list", json!({})))
        .await
        .expect("call");
    let listed = structured(&listed);
    assert_eq!(listed[0]["id"], issue["id"], "{listed}");
    let stats = client
        .call_tool(mcp_params("tracker_stats", json!({})))
        .await
        .expect("call");
    assert_eq!(structured(&stats)["opened"], 1);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_tell_an_author_the_truth() {
    let wasm = tokio::task::spawn_blocking(|| build_plugins(&["tracker", "mistakes"]))
        .await
        .expect("join");
    let h = start(vec![("tracker", at(&wasm[0])), ("mistakes", at(&wasm[1]))]).await;

    // A session tool called without a session: "needs a session", and how to get one.
    let r = h.call("tracker:open", json!({"title": "x"})).await;
    assert_eq!(r.code(), 4007, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("needs a session")),
        "{}",
        r.body
    );

    // A tool declared without a session reads one: without a session_id it is 4007 …
    let r = h.call("mistakes:undeclared-session", json!({})).await;
    assert_eq!(r.code(), 4007, "{}", r.body);
    // … but given one, the answer does not claim a session is missing: it says the
    // declaration dropped it, and how to declare the tool.
    let sid = session(&h, "mistakes", "k").await;
    let r = h
        .call_in(&sid, "mistakes:undeclared-session", json!({}))
        .await;
    assert_ne!(r.code(), 4007, "{}", r.body);
    let message = r.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("declares it without a session"),
        "{message}"
    );
    assert!(
        message.contains(r#"session = \"required\""#)
            || message.contains(r#"session = "required""#),
        "{message}"
    );

    // Codes: exactly the documented set passes; others become 5000.
    for (code, answered) in [
        (4000, 4000),
        (4001, 4001),
        (4006, 4006),
        (4030, 4030),
        (5006, 5006),
        (5012, 5012),
        (4005, 5000),
        (5001, 5000),
        (4242, 5000),
        (4010, 5000),
    ] {
        let r = h.call("mistakes:fail", json!({"code": code})).await;
        assert_eq!(r.code(), answered, "{code}: {}", r.body);
    }

    // A panic's message reaches the reply.
    let r = h.call("mistakes:explode", json!({})).await;
    assert_ne!(r.code(), 0);
    assert!(
        r.body["data"]["panic"]
            .as_str()
            .is_some_and(|p| p.contains("the tracker exploded")),
        "{}",
        r.body
    );
}

/// `wharf sessions create|list|delete` against a running server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_creates_lists_and_deletes_sessions() {
    let wasm = tokio::task::spawn_blocking(|| build_plugins(&["tracker"]))
        .await
        .expect("join");
    let h = start(vec![("tracker", at(&wasm[0]))]).await;
    let url = h.url.clone();
    let wharf = move |args: &[&str]| {
        let out = Command::new(wharf_integration_tests::processes::wharf_bin())
            .arg("sessions")
            .args(args)
            .args(["--url", &url])
            .output()
            .expect("wharf runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let run = wharf.clone();
    let (ok, id, err) =
        tokio::task::spawn_blocking(move || run(&["create", "tracker", "--key", "cli-thread"]))
            .await
            .expect("join");
    assert!(ok, "{err}");
    let r = h
        .call_in(&id, "tracker:open", json!({"title": "from the cli"}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);

    let run = wharf.clone();
    let (ok, listed, err) =
        tokio::task::spawn_blocking(move || run(&["list", "--backend", "tracker"]))
            .await
            .expect("join");
    assert!(ok, "{err}");
    assert!(
        listed.contains(&id) && listed.contains("cli-thread"),
        "{listed}"
    );

    let run = wharf.clone();
    let gone = id.clone();
    let (ok, _, err) = tokio::task::spawn_blocking(move || run(&["delete", &gone]))
        .await
        .expect("join");
    assert!(ok, "{err}");
    let r = h.call_in(&id, "tracker:list", json!({})).await;
    assert_eq!(r.code(), 4007, "{}", r.body);

    // An unknown backend: the server's message and code, and a failing exit.
    let run = wharf.clone();
    let (ok, _, err) = tokio::task::spawn_blocking(move || run(&["create", "nope"]))
        .await
        .expect("join");
    assert!(!ok);
    assert!(err.contains("nope") || err.contains("5011"), "{err}");
}

//! The official MCP Python SDK (2.3) against a real host in each of its connect modes: `auto`
//! negotiates the 2026-07-28 revision through `server/discover`, a client pinned to it works
//! statelessly, a `legacy` client still gets the 2025 handshake; all list and call tools.
//! Without an MCP session a session tool needs an explicit key (never a shared session), and
//! ending a legacy session logs no warning in the client. A modern client's
//! `subscriptions/listen` hears of a backend hot-loaded meanwhile.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use wharf_integration_tests::python::{mcp_sdk, repo_root};
use wharf_integration_tests::{bundled, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_speaks_every_revision() {
    let venv = tokio::task::spawn_blocking(mcp_sdk).await.expect("join");
    let h = start(vec![
        ("echo", bundled("echo")),
        ("pad", bundled("scratchpad")),
    ])
    .await;
    let script = repo_root().join("tests/fixtures/python/mcp_revisions.py");
    let url = format!("{}/mcp", h.url);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(url)
            .output()
            .expect("python runs")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert_eq!(runs.len(), 3, "{stdout}");
    for run in &runs {
        let mode = run["mode"].as_str().expect("mode");
        assert!(run.get("failed").is_none(), "{mode}: {run}");
        let want = if mode == "legacy" {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(run["version"], want, "{run}");
        assert!(
            run["tools"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("echo_say"))),
            "{run}"
        );
        assert_eq!(run["say"], json!({"text": "hihi"}), "{run}");
        assert_eq!(run["session_with_key"]["is_error"], false, "{run}");
        assert_eq!(run["warnings"], json!([]), "the client logged: {run}");
        if mode != "legacy" {
            // No MCP session to fall back on: refused, and the refusal names the key.
            assert_eq!(run["session_without_key"]["is_error"], true, "{run}");
            let text = run["session_without_key"]["text"].as_str().unwrap_or("");
            assert!(text.contains("4007"), "{run}");
            assert!(
                text.contains("X-Wharf-Session-Key") && text.contains("wharf/session_key"),
                "{run}"
            );
        }
    }
}

/// The next line the client printed, or `None` after 90 s.
async fn next(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(std::time::Duration::from_secs(90), lines.recv())
        .await
        .ok()
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_listener_hears_a_hot_load() {
    let venv = tokio::task::spawn_blocking(mcp_sdk).await.expect("join");
    let h = start(vec![("echo", bundled("echo"))]).await;
    let mut child = Command::new(venv.join("bin/python"))
        .arg(repo_root().join("tests/fixtures/python/mcp_revisions.py"))
        .arg(format!("{}/mcp", h.url))
        .arg("listen")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python runs");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    assert_eq!(next(&mut lines).await.as_deref(), Some("ready"));
    h.wharf
        .load_backend("late", bundled("scratchpad"))
        .await
        .expect("hot load");
    let heard = next(&mut lines).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(heard.as_deref(), Some("changed"));
}

/// A 2026-07-28 `tools/call` sent raw, as the revision asks (standard headers, per-request
/// `_meta`): answered with the revision's shape; its tool list carries the caching hints; a
/// `Mcp-Name` that is not the body's tool gets the revision's refusal, never a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_call_is_answered_in_the_revisions_shape() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let client = reqwest::Client::new();
    let send = |name_header: &'static str| {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "echo_say", "arguments": {"text": "hi", "times": 2},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}});
        client
            .post(format!("{}/mcp", h.url))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name_header)
            .json(&body)
            .send()
    };
    let reply = send("echo_say").await.expect("POST");
    assert_eq!(reply.status(), 200);
    assert!(reply.headers().get("mcp-session-id").is_none());
    let body: Value = reply.json().await.expect("one JSON body");
    assert_eq!(body["id"], 7, "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(
        body["result"]["structuredContent"],
        json!({"text": "hihi"}),
        "{body}"
    );
    // The list carries the revision's caching hints: private (filtered per caller).
    let listed: Value = client
        .post(format!("{}/mcp", h.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .json(
            &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("one JSON body");
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    assert_eq!(listed["result"]["ttlMs"], 60_000, "{listed}");

    let mismatched = send("echo_ping").await.expect("POST");
    let status = mismatched.status();
    let text = mismatched.text().await.expect("body");
    assert!(
        status.is_client_error() || text.contains("\"error\""),
        "{status} {text}"
    );
    assert!(!text.contains("hihi"), "{text}");
}

//! Bearer tokens: 401 without or with a bad token on every route, 403 for a missing scope
//! or a backend outside the token's allowlist, and tenants that cannot see each other's
//! sessions (another token gets 4007, as if the session did not exist).

use serde_json::json;
use wharf::config::{TokenConfig, TokenScope};
use wharf_integration_tests::{TestHost, bundled, start_with};

fn token(name: &str, scopes: &[TokenScope], backends: Option<&[&str]>) -> TokenConfig {
    TokenConfig {
        backends: backends.map(|b| b.iter().map(|s| s.to_string()).collect()),
        ..wharf_integration_tests::token(name, &format!("secret-{name}"), scopes)
    }
}

async fn host() -> TestHost {
    start_with(
        vec![
            ("echo", bundled("echo")),
            ("scratchpad", bundled("scratchpad")),
            ("text-index", bundled("text-index")),
        ],
        |s| {
            s.auth.tokens = vec![
                token(
                    "agent",
                    &[TokenScope::Read, TokenScope::Call],
                    Some(&["echo", "scratchpad"]),
                ),
                token("other", &[TokenScope::Read, TokenScope::Call], None),
                token("viewer", &[TokenScope::Read], None),
                token("ops", &[TokenScope::Admin], None),
            ];
        },
    )
    .await
}

async fn send(
    h: &TestHost,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", h.url);
    let mut req = match method {
        "GET" => client.get(url),
        "DELETE" => client.delete(url),
        "PUT" => client.put(url),
        _ => client.post(url),
    };
    if let Some(t) = token {
        req = req.bearer_auth(format!("secret-{t}"));
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(json!({ "raw": text })),
    )
}

#[tokio::test]
async fn every_route_needs_a_valid_token() {
    let h = host().await;
    let routes: [(&str, &str, Option<serde_json::Value>); 9] = [
        ("GET", "/v1/backends", None),
        ("GET", "/v1/tools", None),
        ("GET", "/v1/sessions", None),
        ("POST", "/v1/sessions", Some(json!({"backend": "echo"}))),
        ("GET", "/v1/sessions/ses_x", None),
        ("DELETE", "/v1/sessions/ses_x", None),
        ("POST", "/v1/sessions/ses_x/refresh", Some(json!({}))),
        ("POST", "/v1/call", Some(json!({"tool": "echo:ping"}))),
        (
            "POST",
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        ),
    ];
    for (method, path, body) in routes {
        let (status, reply) = send(&h, method, path, None, body.clone()).await;
        assert_eq!(status, 401, "{method} {path} without a token: {reply}");
        assert_eq!(reply["code"], 4010, "{method} {path}");
        let client = reqwest::Client::new();
        let url = format!("{}{path}", h.url);
        let req = match method {
            "GET" => client.get(url),
            "DELETE" => client.delete(url),
            _ => client.post(url),
        };
        let bad = req
            .bearer_auth("wrong")
            .json(&body.unwrap_or(json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(
            bad.status().as_u16(),
            401,
            "{method} {path} with a bad token"
        );
    }
    assert_eq!(
        send(&h, "GET", "/healthz", None, None).await.0,
        200,
        "health stays open"
    );
}

#[tokio::test]
async fn scopes_and_allowlists_answer_403() {
    let h = host().await;
    let (status, reply) = send(
        &h,
        "POST",
        "/v1/call",
        Some("viewer"),
        Some(json!({"tool": "echo:ping"})),
    )
    .await;
    assert_eq!(
        (status, reply["code"].as_u64()),
        (403, Some(4030)),
        "{reply}"
    );
    assert!(
        reply["message"].as_str().unwrap().contains("call"),
        "{reply}"
    );
    assert_eq!(
        send(&h, "GET", "/v1/tools", Some("viewer"), None).await.0,
        200
    );
    let (status, reply) = send(
        &h,
        "POST",
        "/v1/call",
        Some("agent"),
        Some(json!({"tool": "text-index:search", "args": {"query": "x"}})),
    )
    .await;
    assert_eq!(
        (status, reply["code"].as_u64()),
        (403, Some(4030)),
        "outside the allowlist: {reply}"
    );
    let (_, tools) = send(&h, "GET", "/v1/tools", Some("agent"), None).await;
    let names: Vec<&str> = tools["data"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo:say") && !names.iter().any(|n| n.starts_with("text-index")),
        "{names:?}"
    );
    let (status, reply) = send(
        &h,
        "POST",
        "/v1/call",
        Some("agent"),
        Some(json!({"tool": "echo:say", "args": {"text": "ok"}})),
    )
    .await;
    assert_eq!(
        (status, reply["data"]["result"]["text"].as_str()),
        (200, Some("ok"))
    );
    let (status, _) = send(
        &h,
        "POST",
        "/v1/sessions",
        Some("agent"),
        Some(json!({"backend": "text-index"})),
    )
    .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_token_cannot_see_or_use_another_tokens_session() {
    let h = host().await;
    let (_, made) = send(
        &h,
        "POST",
        "/v1/sessions",
        Some("agent"),
        Some(json!({"backend": "scratchpad", "key": "t1"})),
    )
    .await;
    let id = made["data"]["id"].as_str().unwrap().to_string();
    send(
        &h,
        "POST",
        "/v1/call",
        Some("agent"),
        Some(json!({"tool": "scratchpad:write", "args": {"note": "private"}, "session_id": id})),
    )
    .await;

    let (status, reply) = send(
        &h,
        "GET",
        &format!("/v1/sessions/{id}"),
        Some("other"),
        None,
    )
    .await;
    assert_eq!(
        (status, reply["code"].as_u64()),
        (404, Some(4007)),
        "{reply}"
    );
    let (_, reply) = send(
        &h,
        "POST",
        "/v1/call",
        Some("other"),
        Some(json!({"tool": "scratchpad:read", "session_id": id})),
    )
    .await;
    assert_eq!(reply["code"], 4007, "{reply}");
    let (_, reply) = send(
        &h,
        "DELETE",
        &format!("/v1/sessions/{id}"),
        Some("other"),
        None,
    )
    .await;
    assert_eq!(
        reply["data"]["deleted"], false,
        "another tenant cannot delete it"
    );
    let (_, listed) = send(&h, "GET", "/v1/sessions", Some("other"), None).await;
    assert_eq!(listed["data"]["sessions"], json!([]));
    // The same key under another token is another session.
    let (_, theirs) = send(
        &h,
        "POST",
        "/v1/sessions",
        Some("other"),
        Some(json!({"backend": "scratchpad", "key": "t1"})),
    )
    .await;
    assert_ne!(theirs["data"]["id"], id.as_str());
    // The admin sees every session.
    let (status, reply) = send(&h, "GET", &format!("/v1/sessions/{id}"), Some("ops"), None).await;
    assert_eq!(status, 200, "{reply}");
    let (_, mine) = send(
        &h,
        "POST",
        "/v1/call",
        Some("agent"),
        Some(json!({"tool": "scratchpad:read", "session_id": id})),
    )
    .await;
    assert_eq!(mine["data"]["result"]["notes"], json!(["private"]));
}

#[test]
fn no_token_on_a_public_address_refuses_to_start_unless_insecure() {
    use wharf::config::AuthConfig;
    let public = "0.0.0.0:7420".parse().unwrap();
    let local = "127.0.0.1:7420".parse().unwrap();
    assert!(wharf::server::check_exposure(public, &AuthConfig::default(), false).is_err());
    assert!(wharf::server::check_exposure(public, &AuthConfig::default(), true).is_ok());
    assert!(wharf::server::check_exposure(local, &AuthConfig::default(), false).is_ok());
    let with_token = AuthConfig {
        tokens: vec![token("a", &[TokenScope::Read], None)],
        oauth: None,
    };
    assert!(wharf::server::check_exposure(public, &with_token, false).is_ok());

    // And the binary itself refuses.
    let out = std::process::Command::new(wharf_integration_tests::processes::wharf_bin())
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--insecure"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_leaves_one_audit_line_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[audit]\npath = \"{}\"\n\n[[auth.tokens]]\nname = \"auditor\"\nvalue = \"s3cret-token\"\nscopes = [\"call\", \"read\"]\n\n[backends.echo]\npath = \"bundled:echo\"\n",
            dir.path().join("data").display(),
            dir.path().join("audit.log").display()
        ),
    )
    .unwrap();
    let server = wharf_integration_tests::processes::WharfProcess::start(&config);
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/call", server.url))
        .bearer_auth("s3cret-token")
        .json(&json!({"tool": "echo:say", "args": {"text": "visible", "api_key": "hunter2"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 4004, "{reply}");
    // A clean exit flushes the audit sink.
    assert!(server.terminate(std::time::Duration::from_secs(40)));
    let log: String = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(r#""event":"tool_call""#))
        .collect();
    assert_eq!(audit.len(), 1, "{log}");
    let line = audit[0];
    for expected in [
        "auditor",
        "echo:say",
        r#""code":4004"#,
        r#""duration_ms":"#,
        "visible",
        "***",
    ] {
        assert!(line.contains(expected), "missing `{expected}` in {line}");
    }
    assert!(
        !log.contains("hunter2"),
        "a secret argument reached the log"
    );
    assert!(!log.contains("s3cret-token"), "the token reached the log");
}

//! The whole OAuth flow as a remote MCP client meets it: the official MCP Python SDK's
//! `OAuthClientProvider` against a real host with `[auth.oauth]` and a real authorization
//! server (Authlib, `tests/fixtures/python/oauth_server.py`): a 401 with the challenge,
//! the protected-resource metadata, the server's metadata, dynamic client registration,
//! the authorization code with PKCE, an RFC 9068 access token for this resource — then the
//! client lists and calls tools as the tenant its token's claims name, and that tenant's
//! sessions are its own.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use wharf::config::{OAuthConfig, TokenScope};
use wharf_integration_tests::python::{mcp_sdk, repo_root};
use wharf_integration_tests::{bundled, free_port, start_with, token};

/// The authorization server, killed when dropped.
struct AuthorizationServer {
    child: Child,
    issuer: String,
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn authorization_server(python: &std::path::Path) -> AuthorizationServer {
    let mut child = Command::new(python)
        .arg(repo_root().join("tests/fixtures/python/oauth_server.py"))
        .args(["--subject", "user-7", "--claim", "org=acme"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the authorization server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("it says where it listens");
    let ready: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    AuthorizationServer {
        issuer: ready["issuer"].as_str().expect("issuer").to_string(),
        child,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_logs_in_through_a_real_authorization_server() {
    let venv = tokio::task::spawn_blocking(mcp_sdk).await.expect("join");
    let python = venv.join("bin/python");
    let server = authorization_server(&python);
    // The resource names the address the client reaches, so it is chosen before binding.
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}");
    let oauth: OAuthConfig = toml::from_str(&format!(
        "resource = \"{resource}\"\nauthorization_servers = [\"{}\"]\ntenant_claim = \"org\"",
        server.issuer
    ))
    .expect("oauth config");
    let h = start_with(
        vec![("echo", bundled("echo")), ("pad", bundled("scratchpad"))],
        |s| {
            s.listen = format!("127.0.0.1:{port}").parse().expect("addr");
            s.auth.tokens = vec![token(
                "other",
                "secret-other",
                &[TokenScope::Read, TokenScope::Call],
            )];
            s.auth.oauth = Some(oauth);
        },
    )
    .await;
    let script = repo_root().join("tests/fixtures/python/mcp_oauth_client.py");
    let url = format!("{}/mcp", h.url);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(url)
            .args(["--session-key", "oauth-key"])
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
    let run: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    assert!(run.get("failed").is_none(), "{run}");
    assert_eq!(run["version"], "2026-07-28", "{run}");
    assert!(
        run["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("echo_say")) && t.contains(&json!("pad_write"))),
        "{run}"
    );
    assert_eq!(run["say"], json!({"text": "hihi"}), "{run}");
    assert_eq!(run["pad"]["is_error"], false, "{run}");
    assert_eq!(run["warnings"], json!([]), "the client logged: {run}");
    // The token the server issued: an RFC 9068 access token for this resource, carrying
    // the claim the host maps to the tenant.
    let claims = &run["access_token_claims"];
    assert_eq!(claims["iss"], server.issuer.as_str(), "{claims}");
    let aud = claims["aud"].as_str().unwrap_or("").trim_end_matches('/');
    assert_eq!(aud, resource, "{claims}");
    assert_eq!(claims["org"], "acme", "{claims}");
    assert_eq!(claims["sub"], "user-7", "{claims}");

    // The session the client made is tenant `acme`'s: its token sees it, another tenant's
    // token does not.
    let token = run["access_token"].as_str().expect("the access token");
    let sessions = |bearer: String| {
        let url = format!("{}/v1/sessions", h.url);
        async move {
            let reply: Value = reqwest::Client::new()
                .get(url)
                .bearer_auth(bearer)
                .send()
                .await
                .expect("reaches the host")
                .json()
                .await
                .expect("JSON");
            reply["data"]["sessions"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("{reply}"))
        }
    };
    let mine = sessions(token.to_string()).await;
    assert!(
        mine.iter()
            .any(|s| s["backend"] == "pad" && s["key"] == "oauth-key"),
        "{mine:?}"
    );
    assert!(sessions("secret-other".into()).await.is_empty());
}

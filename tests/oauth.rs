//! `[auth.oauth]` against a real host, attacker first: tokens for another audience, expired
//! or not yet valid, signed by an unknown key, `alg: none`, HMAC keyed with the server's
//! public key, another issuer, no `typ: at+jwt`, a header carrying its own key, a tenant that
//! belongs to a static token, a tampered payload — each a 401 with a `WWW-Authenticate`
//! challenge, never a call. The controls: RS256 and ES256 tokens of the published keys
//! call tools as the tenant their claims name. Keys rotate in without a restart, unknown
//! `kid`s cannot make the host hammer the server, and an unreachable server is a 503.
//!
//! The authorization server here serves only what a resource server reads from one (RFC
//! 8414 metadata and a JWKS) from the test's own key files, so the test can sign the
//! attacker's tokens; `mcp_oauth.rs` runs the whole flow against a real one (Authlib).

use axum::Router;
use axum::routing::get;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wharf::config::{OAuthConfig, TokenScope};
use wharf_integration_tests::python::repo_root;
use wharf_integration_tests::{TestHost, admin_token, bundled, free_port, start_with};

/// The published keys and how often they were fetched.
struct KeyServer {
    issuer: String,
    keys: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("tests/fixtures/oauth").join(name)).expect("fixture")
}

fn jwk(name: &str) -> Value {
    serde_json::from_str(&fixture(&format!("{name}.jwk.json"))).expect("jwk")
}

async fn key_server(published: &[&str]) -> KeyServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let keys = Arc::new(Mutex::new(
        json!({"keys": published.iter().map(|k| jwk(k)).collect::<Vec<_>>()}),
    ));
    let fetches = Arc::new(AtomicUsize::new(0));
    let metadata = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
    });
    let (k, f) = (keys.clone(), fetches.clone());
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/jwks",
            get(move || async move {
                f.fetch_add(1, Ordering::SeqCst);
                axum::Json(k.lock().unwrap().clone())
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    KeyServer {
        issuer,
        keys,
        fetches,
    }
}

fn oauth_config(resource: &str, issuer: &str) -> OAuthConfig {
    toml::from_str(&format!(
        "resource = \"{resource}\"\nauthorization_servers = [\"{issuer}\"]\nkey_refresh_seconds = 2"
    ))
    .expect("oauth config")
}

async fn host(resource: &str, issuer: &str) -> TestHost {
    let oauth = oauth_config(resource, issuer);
    start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![admin_token("secret-ops")];
        s.auth.oauth = Some(oauth);
    })
    .await
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A token of `issuer` for `audience`, valid for five minutes, as tenant `alice`.
fn claims(issuer: &str, audience: &str) -> Value {
    json!({
        "iss": issuer, "aud": audience, "sub": "alice", "client_id": "c1",
        "scope": "wharf:read wharf:call", "iat": now(), "exp": now() + 300, "jti": "j1",
    })
}

fn sign(key: &str, alg: Algorithm, typ: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(key.into());
    header.typ = typ.map(str::to_string);
    let pem = fixture(&format!("{key}.pem"));
    let key = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(pem.as_bytes()),
        _ => EncodingKey::from_rsa_pem(pem.as_bytes()),
    }
    .expect("key");
    jsonwebtoken::encode(&header, claims, &key).expect("sign")
}

fn b64(v: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// Calls `echo:say` with `token`: status, body, `WWW-Authenticate`.
async fn call(h: &TestHost, token: &str) -> (u16, Value, String) {
    let reply = reqwest::Client::new()
        .post(format!("{}/v1/call", h.url))
        .bearer_auth(token)
        .json(&json!({"tool": "echo:say", "args": {"text": "hi"}}))
        .send()
        .await
        .expect("reaches the host");
    let status = reply.status().as_u16();
    let challenge = reply
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = reply.json().await.unwrap_or(Value::Null);
    (status, body, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacker_tokens_get_a_challenge_and_never_a_call() {
    let keys = key_server(&["rsa-a", "ec-p256"]).await;
    let resource = "http://wharf.test:7420";
    let h = host(resource, &keys.issuer).await;
    let good = claims(&keys.issuer, resource);
    let typ = Some("at+jwt");

    // The controls: both published keys verify, the claims name the tenant.
    for token in [
        sign("rsa-a", Algorithm::RS256, typ, &good),
        sign("ec-p256", Algorithm::ES256, typ, &good),
    ] {
        let (status, body, _) = call(&h, &token).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["result"]["text"], "hi");
    }
    // The audience as clients normalise it (a trailing slash) names the same resource.
    let mut slash = good.clone();
    slash["aud"] = json!(format!("{resource}/"));
    assert_eq!(
        call(&h, &sign("rsa-a", Algorithm::RS256, typ, &slash))
            .await
            .0,
        200
    );

    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let rsa_public = fixture("rsa-a.pub.pem");
    let mut hmac_header = Header::new(Algorithm::HS256);
    hmac_header.kid = Some("rsa-a".into());
    hmac_header.typ = Some("at+jwt".into());
    let mut own_key = Header::new(Algorithm::RS256);
    own_key.kid = Some("rsa-b".into());
    own_key.typ = Some("at+jwt".into());
    own_key.jwk = serde_json::from_value(jwk("rsa-b")).ok();
    let valid = sign("rsa-a", Algorithm::RS256, typ, &good);
    let mut parts: Vec<&str> = valid.split('.').collect();
    let forged_payload = b64(&with("sub", json!("mallory")));
    parts[1] = &forged_payload;
    let tampered = parts.join(".");
    let attacks: Vec<(&str, String, &str)> = vec![
        (
            "another audience",
            sign(
                "rsa-a",
                Algorithm::RS256,
                typ,
                &with("aud", json!("http://other.test")),
            ),
            "another audience",
        ),
        (
            "expired",
            sign(
                "rsa-a",
                Algorithm::RS256,
                typ,
                &with("exp", json!(now() - 600)),
            ),
            "expired",
        ),
        (
            "not yet valid",
            sign(
                "rsa-a",
                Algorithm::RS256,
                typ,
                &with("nbf", json!(now() + 600)),
            ),
            "not valid yet",
        ),
        (
            "an unknown key",
            sign("rsa-b", Algorithm::RS256, typ, &good),
            "does not publish",
        ),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "typ": "at+jwt"})),
                b64(&good)
            ),
            "not a signed JWT",
        ),
        (
            "HMAC keyed with the public key",
            jsonwebtoken::encode(
                &hmac_header,
                &good,
                &EncodingKey::from_secret(rsa_public.as_bytes()).unwrap(),
            )
            .unwrap(),
            "shared secret",
        ),
        (
            "another issuer",
            sign(
                "rsa-a",
                Algorithm::RS256,
                typ,
                &with("iss", json!("http://evil.test")),
            ),
            "issuer",
        ),
        (
            "an ID token (no typ at+jwt)",
            sign("rsa-a", Algorithm::RS256, Some("JWT"), &good),
            "not an access token",
        ),
        (
            "its own key in the header",
            jsonwebtoken::encode(
                &own_key,
                &good,
                &EncodingKey::from_rsa_pem(fixture("rsa-b.pem").as_bytes()).unwrap(),
            )
            .unwrap(),
            "does not publish",
        ),
        (
            "a static token's tenant",
            sign("rsa-a", Algorithm::RS256, typ, &with("sub", json!("ops"))),
            "static token",
        ),
        (
            "a reserved tenant",
            sign(
                "rsa-a",
                Algorithm::RS256,
                typ,
                &with("sub", json!("anonymous")),
            ),
            "not a tenant name",
        ),
        ("a tampered payload", tampered, "signature does not verify"),
        (
            "no expiry",
            sign("rsa-a", Algorithm::RS256, typ, &{
                let mut c = good.clone();
                c.as_object_mut().unwrap().remove("exp");
                c
            }),
            "no `exp`",
        ),
        ("garbage", "a.b.c".into(), "not a signed JWT"),
        (
            "oversized",
            format!("{}.{}.x", "a".repeat(9000), "b"),
            "not valid",
        ),
    ];
    for (what, token, why) in &attacks {
        let (status, body, challenge) = call(&h, token).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["code"], 4010, "{what}: {body}");
        assert!(
            body["message"].as_str().unwrap_or("").contains(why),
            "{what}: {body}"
        );
        assert!(
            challenge.starts_with("Bearer ")
                && challenge.contains(
                    "resource_metadata=\"http://wharf.test:7420/.well-known/oauth-protected-resource\""
                )
                && challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
    }
    // MCP without a token: a challenge without an error, naming where to log in.
    let (status, challenge) = {
        let r = reqwest::Client::new()
            .post(format!("{}/mcp", h.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
            .send()
            .await
            .unwrap();
        let c = r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_string();
        (r.status().as_u16(), c)
    };
    assert_eq!(status, 401, "MCP without a token");
    assert!(
        challenge.contains("resource_metadata=")
            && challenge.contains("scope=\"wharf:read wharf:call\"")
            && !challenge.contains("error="),
        "{challenge}"
    );
    // Fifty tokens naming keys the server does not publish, sent at once: the keys are
    // fetched again at most once per refresh interval (2 s here), not once per token.
    let before = keys.fetches.load(Ordering::SeqCst);
    let started = std::time::Instant::now();
    let unknown: Vec<_> = (0..50)
        .map(|i| {
            let mut c = good.clone();
            c["jti"] = json!(format!("u{i}"));
            let token = sign("rsa-b", Algorithm::RS256, typ, &c);
            let h = &h;
            async move { call(h, &token).await.0 }
        })
        .collect();
    assert!(
        futures::future::join_all(unknown)
            .await
            .iter()
            .all(|s| *s == 401)
    );
    let fetched = keys.fetches.load(Ordering::SeqCst) - before;
    let windows = started.elapsed().as_secs() / 2 + 1;
    assert!(
        fetched as u64 <= windows,
        "the JWKS was fetched {fetched} times in {windows} refresh intervals"
    );
    // The static token still works beside OAuth.
    let (status, body, _) = call(&h, "secret-ops").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_in_and_out_without_a_restart() {
    let keys = key_server(&["rsa-a"]).await;
    let resource = "http://wharf.test:7420";
    let h = host(resource, &keys.issuer).await;
    let typ = Some("at+jwt");
    let mut c = claims(&keys.issuer, resource);
    assert_eq!(
        call(&h, &sign("rsa-a", Algorithm::RS256, typ, &c)).await.0,
        200
    );
    // The server rotates: only rsa-b is published now.
    *keys.keys.lock().unwrap() = json!({"keys": [jwk("rsa-b")]});
    tokio::time::sleep(Duration::from_millis(2100)).await;
    c["jti"] = json!("j2");
    let (status, body, _) = call(&h, &sign("rsa-b", Algorithm::RS256, typ, &c)).await;
    assert_eq!(status, 200, "the rotated-in key: {body}");
    // A new token of the withdrawn key is refused (a token verified before stays valid
    // until it expires: the host caches verifications, not keys' trust).
    c["jti"] = json!("j3");
    let (status, body, _) = call(&h, &sign("rsa-a", Algorithm::RS256, typ, &c)).await;
    assert_eq!(status, 401, "the withdrawn key: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_metadata_names_the_servers_and_an_unreachable_one_is_a_503() {
    // Nothing listens on this port: the keys cannot be fetched.
    let gone = format!("http://127.0.0.1:{}", free_port());
    let resource = "http://wharf.test:7420/mcp";
    let h = host(resource, &gone).await;
    let meta: Value = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        h.url
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(meta["resource"], resource);
    assert_eq!(meta["authorization_servers"], json!([gone]));
    assert_eq!(
        meta["scopes_supported"],
        json!(["wharf:read", "wharf:call"])
    );
    assert_eq!(meta["bearer_methods_supported"], json!(["header"]));
    // The root well-known path describes it too (clients fall back to it); another path
    // is another resource, not described here (no route: 4002).
    let root: Value = reqwest::get(format!("{}/.well-known/oauth-protected-resource", h.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root["resource"], resource);
    let other = reqwest::get(format!("{}/.well-known/oauth-protected-resource/x", h.url))
        .await
        .unwrap();
    assert_eq!(other.status(), 400);
    // OpenAPI documents both, and the bearer scheme says where tokens come from.
    let doc: Value = reqwest::get(format!("{}/openapi.json", h.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        assert!(doc["paths"][path]["get"].is_object(), "{path} undocumented");
    }
    let token = sign(
        "rsa-a",
        Algorithm::RS256,
        Some("at+jwt"),
        &claims(&gone, resource),
    );
    let (status, body, _) = call(&h, &token).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], 5012, "{body}");

    // Without [auth.oauth] there is no metadata, and a 401 still carries a challenge.
    let plain = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![wharf_integration_tests::token(
            "a",
            "secret-a",
            &[TokenScope::Call],
        )];
    })
    .await;
    let none = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource",
        plain.url
    ))
    .await
    .unwrap();
    assert_eq!(none.status(), 400, "no route without [auth.oauth]");
    let (status, _, challenge) = call(&plain, "wrong").await;
    assert_eq!(status, 401);
    assert!(
        challenge.starts_with("Bearer realm=\"wharf\"") && !challenge.contains("resource_metadata"),
        "{challenge}"
    );
}

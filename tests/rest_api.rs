//! The REST API against a real host with the bundled components: tools, calls, sessions,
//! attachments, and every kind of bad input answered with the right code.

use base64::Engine as _;
use serde_json::json;
use wharf_integration_tests::{bundled, start, start_with};

async fn host() -> wharf_integration_tests::TestHost {
    start(vec![
        ("echo", bundled("echo")),
        ("text-index", bundled("text-index")),
        ("scratchpad", bundled("scratchpad")),
    ])
    .await
}

#[tokio::test]
async fn health_backends_and_tools_with_schemas() {
    let h = host().await;
    assert_eq!(h.get("/healthz").await.code(), 0);
    assert_eq!(h.get("/readyz").await.code(), 0);
    let backends = h.get("/v1/backends").await;
    let names: Vec<&str> = backends.body["data"]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "scratchpad", "text-index"]);
    let echo = h.backend_info("echo").await;
    assert_eq!(echo["world"], "resource-backend");
    assert_eq!(echo["wit"], "wharf:plugin@0.2.0");
    assert_eq!(echo["contract"], "0.2.0");
    let tools = h.get("/v1/tools").await;
    let tools = tools.body["data"]["tools"].as_array().unwrap().clone();
    let say = tools
        .iter()
        .find(|t| t["name"] == "echo:say")
        .expect("echo:say listed");
    assert_eq!(say["input_schema"]["properties"]["text"]["type"], "string");
    assert_eq!(say["input_schema"]["required"], json!(["text"]));
    assert_eq!(say["annotations"]["read_only"], true);
    let write = tools
        .iter()
        .find(|t| t["name"] == "scratchpad:write")
        .unwrap();
    assert_eq!(write["session"], "required");
}

#[tokio::test]
async fn calls_with_aliases_and_results() {
    let h = host().await;
    for name in ["echo:say", "echo.say", "echo_say", "echo-say", "say"] {
        let r = h.call(name, json!({"text": "ab", "times": 2})).await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        assert_eq!(r.body["data"]["result"]["text"], "abab");
        assert_eq!(r.body["meta"]["tool"], "echo:say");
        assert_eq!(r.body["meta"]["backend"], "echo");
        assert!(r.body["meta"]["trace_id"].as_str().unwrap().len() >= 16);
    }
    let r = h
        .call(
            "text-index:search",
            json!({"query": "database server", "top_k": 1}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(r.body["data"]["result"][0]["id"], "postgres");
    let r = h.call("text-index:search", json!({"query": "zebra"})).await;
    assert_eq!((r.status, r.code()), (200, 4006), "{}", r.body);
}

#[tokio::test]
async fn ambiguous_short_names_list_the_candidates() {
    let h = start(vec![("echo", bundled("echo")), ("echo2", bundled("echo"))]).await;
    let r = h.call("ping", json!({})).await;
    assert_eq!((r.status, r.code()), (400, 4002), "{}", r.body);
    assert_eq!(
        r.body["data"]["candidates"],
        json!(["echo2:ping", "echo:ping"])
    );
    assert!(r.body["message"].as_str().unwrap().contains("ambiguous"));
    assert_eq!(
        h.call("echo2.ping", json!({})).await.body["data"]["result"],
        "pong"
    );
}

#[tokio::test]
async fn bad_input_gets_the_right_code() {
    let h = start_with(
        vec![
            ("echo", bundled("echo")),
            ("scratchpad", bundled("scratchpad")),
        ],
        |s| s.max_body_bytes = 64 * 1024,
    )
    .await;
    let cases = [
        (h.post_raw("/v1/call", "{not json").await, 400, 4002),
        (h.post_raw("/v1/call", "").await, 400, 4002),
        (h.post_raw("/v1/call", "[1,2]").await, 400, 4002),
        (h.post("/v1/call", json!({"args": {}})).await, 400, 4003),
        (h.post("/v1/call", json!({"tool": 5})).await, 400, 4004),
        (h.call("echo:say", json!({})).await, 400, 4003),
        (h.call("echo:say", json!({"text": 5})).await, 400, 4004),
        (
            h.call("echo:say", json!({"text": "x", "times": 0})).await,
            400,
            4004,
        ),
        (
            h.call("echo:say", json!({"text": "x", "bogus": 1})).await,
            400,
            4004,
        ),
        (
            h.post("/v1/call", json!({"tool": "echo:say", "args": "text"}))
                .await,
            400,
            4004,
        ),
        (h.call("nope:nothing", json!({})).await, 400, 4002),
        (
            h.post_raw(
                "/v1/call",
                format!(
                    "{{\"tool\":\"echo:say\",\"args\":{{\"text\":\"{}\"}}}}",
                    "x".repeat(100_000)
                ),
            )
            .await,
            413,
            4013,
        ),
        (
            h.post(
                "/v1/call",
                json!({"tool": "scratchpad:read", "args": {}, "session_id": "ses_missing"}),
            )
            .await,
            404,
            4007,
        ),
        (h.call("scratchpad:read", json!({})).await, 404, 4007),
        (h.get("/v1/sessions/ses_missing").await, 404, 4007),
        (
            h.post("/v1/sessions/ses_missing/refresh", json!({})).await,
            404,
            4007,
        ),
        (
            // A backend this host never had is the caller's typo (4002), not an outage.
            h.post("/v1/sessions", json!({"backend": "nope"})).await,
            400,
            4002,
        ),
        (h.post("/v1/sessions", json!({"key": "k"})).await, 400, 4003),
        (h.get("/v1/nothing-here").await, 400, 4002),
    ];
    for (i, (reply, status, code)) in cases.iter().enumerate() {
        assert_eq!(
            (reply.status, reply.code()),
            (*status, *code),
            "case {i}: {}",
            reply.body
        );
        assert!(
            !reply.body["message"].as_str().unwrap_or("").is_empty(),
            "case {i} has a message"
        );
        assert!(
            reply.body["meta"]["trace_id"].is_string(),
            "case {i} has meta"
        );
    }
    // The host is still fine.
    assert_eq!(h.call("echo:ping", json!({})).await.code(), 0);
}

#[tokio::test]
async fn backend_codes_are_mapped_and_host_codes_cannot_be_forged() {
    let h = host().await;
    let r = h
        .call("echo:fail", json!({"code": 4001, "message": "no"}))
        .await;
    assert_eq!((r.status, r.code()), (400, 4001));
    assert_eq!(r.body["message"], "no");
    for forged in [5013, 5011, 0, 4010, 4290, 9999] {
        let r = h
            .call("echo:fail", json!({"code": forged, "message": "forged"}))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (500, 5000),
            "code {forged} became {}",
            r.body
        );
    }
}

#[tokio::test]
async fn attachments_come_back_as_base64_with_their_type() {
    let h = host().await;
    let r = h.call("echo:pixel", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let a = &r.body["data"]["attachments"][0];
    assert_eq!(a["mime_type"], "image/png");
    assert_eq!(a["name"], "pixel.png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(a["data_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(a["size"], bytes.len());
}

#[tokio::test]
async fn sessions_are_idempotent_by_key_and_carry_data() {
    let h = host().await;
    let a = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "thread-1", "config": {"title": "mine"}}),
        )
        .await;
    assert_eq!(a.code(), 0, "{}", a.body);
    let id = a.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(a.body["data"]["created"], true);
    assert_eq!(a.body["data"]["data"]["title"], "mine");
    let again = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "thread-1"}),
        )
        .await;
    assert_eq!(again.body["data"]["id"], id.as_str());
    assert_eq!(again.body["data"]["created"], false);
    let bad_config = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "t2", "config": {"title": 7}}),
        )
        .await;
    assert_eq!(bad_config.code(), 4004, "{}", bad_config.body);

    for (i, note) in ["one", "two", "three"].iter().enumerate() {
        let r = h
            .call_in(&id, "scratchpad:write", json!({"note": note}))
            .await;
        assert_eq!(r.body["data"]["result"]["count"], i + 1, "{}", r.body);
        assert_eq!(r.body["meta"]["session_id"], id.as_str());
    }
    let read = h.call_in(&id, "scratchpad.read", json!({})).await;
    assert_eq!(
        read.body["data"]["result"]["notes"],
        json!(["one", "two", "three"])
    );
    assert_eq!(read.body["data"]["result"]["owner_key"], "thread-1");

    let list = h.get("/v1/sessions?backend=scratchpad&key=thread-1").await;
    assert_eq!(list.body["data"]["sessions"].as_array().unwrap().len(), 1);
    let before = h.get(&format!("/v1/sessions/{id}")).await.body["data"]["last_activity_ms"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let refreshed = h
        .post(&format!("/v1/sessions/{id}/refresh"), json!({}))
        .await;
    assert!(refreshed.body["data"]["last_activity_ms"].as_u64().unwrap() > before);

    let del = h.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        (del.code(), del.body["data"]["deleted"].clone()),
        (0, json!(true))
    );
    let del2 = h.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        (del2.code(), del2.body["data"]["deleted"].clone()),
        (0, json!(false))
    );
    assert_eq!(
        h.call_in(&id, "scratchpad:read", json!({})).await.code(),
        4007
    );
    // A new session for the same key starts empty.
    let fresh = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "thread-1"}),
        )
        .await;
    assert_ne!(fresh.body["data"]["id"], id.as_str());
    assert_eq!(fresh.body["data"]["data"]["notes"], json!([]));
}

#[tokio::test]
async fn a_session_of_one_backend_cannot_be_used_with_another() {
    let h = start(vec![
        ("scratchpad", bundled("scratchpad")),
        ("pad2", bundled("scratchpad")),
    ])
    .await;
    let s = h
        .post("/v1/sessions", json!({"backend": "scratchpad", "key": "k"}))
        .await;
    let id = s.body["data"]["id"].as_str().unwrap();
    assert_eq!(h.call_in(id, "pad2:read", json!({})).await.code(), 4007);
    assert_eq!(h.call_in(id, "scratchpad:read", json!({})).await.code(), 0);
}

#[tokio::test]
async fn sixty_four_concurrent_calls_get_their_own_answers() {
    let h = host().await;
    let mut calls = Vec::new();
    for i in 0..64 {
        let text = format!("call-{i}-");
        let h = &h;
        calls.push(async move {
            (
                i,
                h.call("echo:say", json!({"text": text, "times": (i % 3) + 1}))
                    .await,
            )
        });
    }
    for (i, r) in futures::future::join_all(calls).await {
        assert_eq!(r.code(), 0, "{}", r.body);
        assert_eq!(
            r.body["data"]["result"]["text"],
            format!("call-{i}-").repeat((i % 3) + 1)
        );
    }
    // And 64 concurrent writes over 8 sessions: no cross-talk, nothing lost.
    let mut ids = Vec::new();
    for k in 0..8 {
        let s = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": format!("w{k}")}),
            )
            .await;
        ids.push(s.body["data"]["id"].as_str().unwrap().to_string());
    }
    let mut writes = Vec::new();
    for i in 0..64 {
        let (h, id) = (&h, ids[i % 8].clone());
        writes.push(async move {
            h.call_in(&id, "scratchpad:write", json!({"note": format!("n{i}")}))
                .await
        });
    }
    for r in futures::future::join_all(writes).await {
        assert_eq!(r.code(), 0, "{}", r.body);
    }
    for (k, id) in ids.iter().enumerate() {
        let notes =
            h.call_in(id, "scratchpad:read", json!({})).await.body["data"]["result"]["notes"]
                .clone();
        let mut got: Vec<String> = notes
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        got.sort();
        let mut want: Vec<String> = (0..64)
            .filter(|i| i % 8 == k)
            .map(|i| format!("n{i}"))
            .collect();
        want.sort();
        assert_eq!(got, want, "session {k}");
    }
}

#[tokio::test]
async fn secrets_in_backend_config_are_redacted() {
    let mut cfg = bundled("text-index");
    cfg.config = Some(toml_value(
        r#"api_token = "hunter2"
documents = [{ id = "a", text = "alpha beta" }]"#,
    ));
    // The config is shown to admins only (a reader's view is in tests/hardening_edge.rs).
    let h = wharf_integration_tests::start_with(vec![("text-index", cfg)], |s| {
        s.auth.tokens = vec![wharf_integration_tests::admin_token("t-ops")];
    })
    .await;
    let as_admin = |r: reqwest::RequestBuilder| r.bearer_auth("t-ops");
    let backends: serde_json::Value =
        as_admin(reqwest::Client::new().get(format!("{}/v1/backends", h.url)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let info = &backends["data"]["backends"][0];
    assert_eq!(info["config"]["api_token"], "***");
    assert_eq!(info["config"]["documents"][0]["id"], "a");
    assert!(!backends.to_string().contains("hunter2"));
    // The operator's documents were indexed by warmup.
    let found: serde_json::Value =
        as_admin(reqwest::Client::new().post(format!("{}/v1/call", h.url)))
            .json(&json!({"tool": "text-index:search", "args": {"query": "alpha"}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(found["data"]["result"][0]["id"], "a");
}

fn toml_value(text: &str) -> toml::Value {
    toml::from_str(text).unwrap()
}

//! A plain MCP `tools/call` answered without rmcp's session worker (`api/mcp/direct_call`),
//! with a raw keep-alive HTTP client as agents' own clients send it: the answer is the one
//! rmcp gives for the same call, one JSON body; `notifications/cancelled` still drops a
//! running call; a client that hangs up drops it too, and so does ending the MCP session.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf_integration_tests::{TestHost, bundled, start};

const PROTOCOL: &str = "2025-06-18";

/// An initialized MCP session on one kept-alive connection.
struct Session {
    client: reqwest::Client,
    url: String,
    id: String,
}

impl Session {
    async fn open(h: &TestHost) -> Session {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let url = format!("{}/mcp", h.url);
        let init = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(init.status(), 200);
        let id = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let session = Session { client, url, id };
        let done = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(done.status(), 202);
        session
    }

    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .json(body)
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        self.request(body).send().await.unwrap()
    }

    /// A `tools/call`; its HTTP status, `Content-Type` and body.
    async fn call(
        &self,
        id: u64,
        tool: &str,
        args: Value,
        meta: Option<Value>,
    ) -> (u16, String, String) {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let reply = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
        let status = reply.status().as_u16();
        let kind = reply.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        (status, kind, reply.text().await.unwrap())
    }
}

/// Polls `check` every 100 ms until it holds; fails after `secs` seconds.
async fn eventually(secs: u64, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_call_gets_the_answer_rmcp_gives() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let s = Session::open(&h).await;
    let args = json!({"text": "hi", "times": 2});
    // With a progress token the call goes through rmcp's session worker; without, not.
    let through_rmcp = s
        .call(
            1,
            "echo_say",
            args.clone(),
            Some(json!({"progressToken": "p"})),
        )
        .await;
    let direct = s.call(1, "echo_say", args, None).await;
    assert_eq!(direct.0, 200);
    assert_eq!(direct.1, "application/json", "one JSON body: {}", direct.2);
    assert_eq!(through_rmcp.1, "application/json", "{}", through_rmcp.2);
    let direct: Value = serde_json::from_str(&direct.2).unwrap();
    let through_rmcp: Value = serde_json::from_str(&through_rmcp.2).unwrap();
    assert_eq!(direct, through_rmcp);
    assert_eq!(direct["result"]["isError"], false, "{direct}");
    assert_eq!(
        direct["result"]["structuredContent"]["text"], "hihi",
        "{direct}"
    );

    // A tool that does not exist is invalid params either way; a failing tool is isError.
    for meta in [None, Some(json!({"progressToken": 9}))] {
        let (_, _, body) = s.call(2, "echo_nope", json!({}), meta.clone()).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], -32602, "{meta:?}: {body}");
        assert_eq!(body["id"], 2);
        let (_, _, body) = s
            .call(3, "echo_say", json!({"times": 1}), meta.clone())
            .await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["result"]["isError"], true, "{meta:?}: {body}");
        assert!(
            body["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("4003"),
            "schema refusal: {body}"
        );
    }

    // A string id comes back as the same string.
    let reply = s
        .post(
            &json!({"jsonrpc": "2.0", "id": "seven", "method": "tools/call",
            "params": {"name": "echo_ping", "arguments": {}}}),
        )
        .await;
    let reply: Value = reply.json().await.unwrap();
    assert_eq!(reply["id"], "seven", "{reply}");

    // Once the session is ended, a call in it is 4007, as rmcp answers it.
    let ended = s
        .client
        .delete(&s.url)
        .header("mcp-session-id", &s.id)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success());
    let (status, _, body) = s.call(4, "echo_ping", json!({}), None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("4007"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_cancelled_drops_a_direct_call() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = std::sync::Arc::new(Session::open(&h).await);
    let started = Instant::now();
    let spinning = tokio::spawn({
        let s = s.clone();
        async move { s.call(7, "bad_spin", json!({}), None).await }
    });
    let busy = async || h.backend_info("bad").await["instances"]["busy"] == 1;
    eventually(10, "the spin never started", busy).await;
    // Another id, or the right id in another MCP session, cancels nothing.
    let other = Session::open(&h).await;
    for (session, id) in [(&*s, 8), (&other, 7)] {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "test"}});
        assert_eq!(session.post(&note).await.status(), 202);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !spinning.is_finished(),
        "a cancel of another call stopped this one"
    );

    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "test"}});
    assert_eq!(s.post(&note).await.status(), 202);
    let (status, kind, body) = tokio::time::timeout(Duration::from_secs(10), spinning)
        .await
        .expect("the cancelled call still runs")
        .unwrap();
    // As rmcp ends a cancelled request: an event stream with no message.
    assert_eq!(
        (status, kind.as_str(), body.as_str()),
        (200, "text/event-stream", "")
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not the call timeout"
    );
    let discarded = h.backend_info("bad").await["instances"]["discarded"].clone();
    assert_ne!(discarded, 0, "the spinning instance was kept");
    let (_, _, count) = s.call(9, "bad_count", json!({}), None).await;
    assert!(
        count.contains(r#""isError":false"#),
        "the session goes on: {count}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_drops_its_direct_call() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = Session::open(&h).await;
    let spinning = tokio::spawn({
        let request = s.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bad_spin", "arguments": {}}}));
        async move { request.send().await }
    });
    let busy = async || h.backend_info("bad").await["instances"]["busy"] == 1;
    eventually(10, "the spin never started", busy).await;
    spinning.abort();
    drop(s);
    let discarded = async || h.backend_info("bad").await["instances"]["discarded"] != 0;
    eventually(10, "the call outlived its client", discarded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_the_mcp_session_drops_its_direct_calls() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = std::sync::Arc::new(Session::open(&h).await);
    let spinning = tokio::spawn({
        let s = s.clone();
        async move { s.call(1, "bad_spin", json!({}), None).await }
    });
    let busy = async || h.backend_info("bad").await["instances"]["busy"] == 1;
    eventually(10, "the spin never started", busy).await;
    let ended = s
        .client
        .delete(&s.url)
        .header("mcp-session-id", &s.id)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let (status, kind, body) = tokio::time::timeout(Duration::from_secs(10), spinning)
        .await
        .expect("the ended session's call still runs")
        .unwrap();
    assert_eq!(
        (status, kind.as_str(), body.as_str()),
        (200, "text/event-stream", "")
    );
    let discarded = h.backend_info("bad").await["instances"]["discarded"].clone();
    assert_ne!(discarded, 0, "the spinning instance was kept");
}

//! A plain MCP `tools/call` answered without rmcp's session worker (`api/mcp/direct_call`),
//! with a raw keep-alive HTTP client as agents' own clients send it: the answer is the one
//! rmcp gives for the same call, one JSON body; `notifications/cancelled` still drops a
//! running call; a client that hangs up drops it too, and so does ending the MCP session.

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wharf_integration_tests::raw_mcp::{RawMcpSession as Session, Reply};
use wharf_integration_tests::{TestHost, bundled, eventually, start};

/// An MCP session of `h` on one kept-alive connection.
async fn open(h: &TestHost) -> Session {
    Session::open(&format!("{}/mcp", h.url)).await
}

/// Starts `bad_spin` as request `id` of `s` and waits until it holds an instance.
async fn spin(h: &TestHost, s: &Arc<Session>, id: u64) -> tokio::task::JoinHandle<Reply> {
    let spinning = tokio::spawn({
        let s = s.clone();
        async move { s.call(id, "bad_spin", json!({}), None).await }
    });
    until_busy(h).await;
    spinning
}

/// Waits until the `bad` backend's one instance is busy.
async fn until_busy(h: &TestHost) {
    let busy = async || h.backend_info("bad").await["instances"]["busy"] == 1;
    eventually(10, "the spin never started", busy).await;
}

/// The spinning call ends within 10 s as rmcp ends a cancelled request (an event stream
/// with no message), and its instance is discarded.
async fn ends_cancelled(h: &TestHost, spinning: tokio::task::JoinHandle<Reply>, what: &str) {
    let (status, kind, body) = tokio::time::timeout(Duration::from_secs(10), spinning)
        .await
        .unwrap_or_else(|_| panic!("{what}"))
        .unwrap();
    assert_eq!(
        (status, kind.as_str(), body.as_str()),
        (200, "text/event-stream", "")
    );
    let discarded = h.backend_info("bad").await["instances"]["discarded"].clone();
    assert_ne!(discarded, 0, "the spinning instance was kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_call_gets_the_answer_rmcp_gives() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let s = open(&h).await;
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
    assert!(s.end().await.is_success());
    let (status, _, body) = s.call(4, "echo_ping", json!({}), None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("4007"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_cancelled_drops_a_direct_call() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = Arc::new(open(&h).await);
    let started = Instant::now();
    let spinning = spin(&h, &s, 7).await;
    // Another id, or the right id in another MCP session, cancels nothing.
    let other = open(&h).await;
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
    ends_cancelled(&h, spinning, "the cancelled call still runs").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not the call timeout"
    );
    let (_, _, count) = s.call(9, "bad_count", json!({}), None).await;
    assert!(
        count.contains(r#""isError":false"#),
        "the session goes on: {count}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_drops_its_direct_call() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = open(&h).await;
    let spinning = tokio::spawn({
        let request = s.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bad_spin", "arguments": {}}}));
        async move { request.send().await }
    });
    until_busy(&h).await;
    spinning.abort();
    drop(s);
    let discarded = async || h.backend_info("bad").await["instances"]["discarded"] != 0;
    eventually(10, "the call outlived its client", discarded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_the_mcp_session_drops_its_direct_calls() {
    let h = start(vec![("bad", bundled("misbehaving"))]).await;
    let s = Arc::new(open(&h).await);
    let spinning = spin(&h, &s, 1).await;
    let ended = s.end().await;
    assert!(ended.is_success(), "{ended}");
    ends_cancelled(&h, spinning, "the ended session's call still runs").await;
}

//! Ending an MCP session: `DELETE /mcp` answers what the official clients accept (204, not
//! rmcp's 202), releases the Wharf sessions keyed by that MCP session id (their sandboxes
//! go within a second) and keeps those keyed by an explicit session key; an id the client
//! was never given ends nothing.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf_integration_tests::raw_mcp::RawMcpSession;
use wharf_integration_tests::{bundled, containers_labelled, docker_provider, start};

/// The Wharf session a raw MCP reply names (`structuredContent._meta` or the result's
/// `_meta`), from the reply's one JSON body.
fn session_of(body: &str) -> String {
    let reply: Value = serde_json::from_str(body).expect("one JSON reply");
    assert_eq!(reply["result"]["isError"], false, "{body}");
    let meta = &reply["result"]["_meta"];
    meta["wharf/session_id"]
        .as_str()
        .or_else(|| meta["session_id"].as_str())
        .unwrap_or_else(|| panic!("no session id in {body}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_end_releases_what_the_mcp_session_keyed() {
    let h = start(vec![
        ("pad", bundled("scratchpad")),
        ("docker", docker_provider()),
    ])
    .await;
    let s = RawMcpSession::open(&format!("{}/mcp", h.url)).await;

    // Keyed by the MCP session id (no key given): a pad and a sandbox.
    let (status, _, body) = s
        .call(1, "docker_run_command", json!({"command": "true"}), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let by_mcp = session_of(&body);
    let (_, _, body) = s.call(2, "pad_write", json!({"note": "x"}), None).await;
    let pad_by_mcp = session_of(&body);
    // Keyed explicitly: the agent's, kept.
    let kept_key = format!("kept-{}", uuid::Uuid::new_v4());
    let (status, _, body) = s
        .call(
            3,
            "docker_run_command",
            json!({"command": "true"}),
            Some(json!({"wharf/session_key": kept_key})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let kept = session_of(&body);
    assert_ne!(kept, by_mcp);
    assert_eq!(containers_labelled("wharf.session", &by_mcp).len(), 1);

    // An id this client was never given ends nothing (another token presenting this
    // session's id is refused earlier, by `api/mcp/owners`; not exercised here).
    let forged = s
        .client
        .delete(&s.url)
        .header("mcp-session-id", "not-this-one")
        .send()
        .await
        .expect("DELETE");
    assert_eq!(forged.status(), 404);

    let ended = s.end().await;
    assert!(
        ended == 204 || ended == 200,
        "the SDKs accept 200 or 204 for DELETE, not {ended}"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let gone = containers_labelled("wharf.session", &by_mcp).is_empty()
            && h.get(&format!("/v1/sessions/{by_mcp}")).await.code() == 4007
            && h.get(&format!("/v1/sessions/{pad_by_mcp}")).await.code() == 4007;
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sessions keyed by the MCP session are still there a second after it ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(h.get(&format!("/v1/sessions/{kept}")).await.code(), 0);
    assert_eq!(containers_labelled("wharf.session", &kept).len(), 1);
    assert_eq!(h.delete(&format!("/v1/sessions/{kept}")).await.code(), 0);
}

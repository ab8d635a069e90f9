//! A Python backend answers like a Rust one: atomic kv (`increment`, `compare_and_swap`),
//! outbound HTTP with no WASI import in the module, a denial as 4030 naming the grant, an
//! uncaught exception as 5000 saying where it was raised.

use super::{seeded_data_dir, workbench};
use serde_json::json;
use wharf_integration_tests::start_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_answers_like_rust() {
    let port = wharf_integration_tests::loopback_upstream("from upstream");
    let mut granted = workbench(None);
    granted.grants.http_hosts = vec![format!("127.0.0.1:{port}")];
    granted.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    let data = seeded_data_dir();
    let dir = data.path().to_path_buf();
    let h = start_with(
        vec![("workbench", granted), ("closed", workbench(None))],
        |s| s.data_dir = dir,
    )
    .await;

    // increment: one step on the host, the new value back.
    let r = h.call("workbench:bump", json!({"counter": "c"})).await;
    assert_eq!(r.body["data"]["result"]["value"], 1, "{}", r.body);
    let r = h
        .call("workbench:bump", json!({"counter": "c", "by": 2}))
        .await;
    assert_eq!(r.body["data"]["result"]["value"], 3, "{}", r.body);

    // compare_and_swap: set if absent, then refused on a stale expectation.
    let r = h
        .call("workbench:claim", json!({"name": "desk", "owner": "ann"}))
        .await;
    assert_eq!(
        r.body["data"]["result"],
        json!({"claimed": true, "owner": "ann"})
    );
    let r = h
        .call("workbench:claim", json!({"name": "desk", "owner": "bob"}))
        .await;
    assert_eq!(
        r.body["data"]["result"],
        json!({"claimed": false, "owner": "ann"})
    );
    let r = h
        .call(
            "workbench:claim",
            json!({"name": "desk", "owner": "bob", "expected": "ann"}),
        )
        .await;
    assert_eq!(
        r.body["data"]["result"],
        json!({"claimed": true, "owner": "bob"})
    );

    // HTTP, granted: the module imports nothing of wasi:http and it works.
    let url = format!("http://127.0.0.1:{port}/x");
    let r = h.call("workbench:fetch", json!({"url": url})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(
        r.body["data"]["result"],
        json!({"status": 200, "body": "from upstream"})
    );

    // HTTP, not granted: 4030 naming the grant (HTTP 403), as the Rust SDK answers.
    let r = h.call("closed:fetch", json!({"url": url})).await;
    assert_eq!(r.code(), 4030, "{}", r.body);
    assert_eq!(r.status, 403, "{}", r.body);
    let message = r.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("grants.http_hosts") && message.contains(&format!("127.0.0.1:{port}")),
        "{message}"
    );

    // An uncaught exception: 5000 with its type and where it was raised.
    let r = h.call("workbench:divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert_eq!(
        r.body["data"]["exception"], "ZeroDivisionError",
        "{}",
        r.body
    );
    assert!(
        r.body["data"]["at"]
            .as_str()
            .is_some_and(|at| at.contains("app.py") && at.contains("divide")),
        "{}",
        r.body
    );
}

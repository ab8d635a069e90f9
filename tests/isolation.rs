//! One misbehaving backend never takes the host or its neighbours down: its trap, infinite
//! loop and memory blow-up each answer the right code within the deadline, the instance is
//! replaced, and calls to other backends keep succeeding throughout.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::{TestHost, bundled, start};

async fn host() -> TestHost {
    let mut bad = bundled("misbehaving");
    bad.limits.call_timeout_ms = Some(1_000);
    bad.limits.memory_mb = 32;
    bad.limits.pool_max = 4;
    start(vec![("misbehaving", bad), ("echo", bundled("echo"))]).await
}

fn counter(info: &serde_json::Value, name: &str) -> u64 {
    info["instances"][name].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trap_answers_5013_and_the_instance_is_replaced() {
    let h = host().await;
    let first = h.call("misbehaving:count", json!({})).await;
    assert_eq!(first.body["data"]["result"], 1);
    let r = h.call("misbehaving:trap", json!({})).await;
    assert_eq!((r.status, r.code()), (500, 5013), "{}", r.body);
    // The SDK's panic hook (contract 0.2.0) told the host why before the trap.
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("panicked: misbehaving: trapping on purpose"),
        "{}",
        r.body
    );
    assert!(
        r.body["data"]["panic"]
            .as_str()
            .unwrap()
            .contains("misbehaving: trapping on purpose"),
        "{}",
        r.body
    );
    let info = h.backend_info("misbehaving").await;
    assert_eq!(counter(&info, "discarded"), 1);
    // A fresh instance serves the next call: its counter starts again.
    let after = h.call("misbehaving:count", json!({})).await;
    assert_eq!(after.code(), 0, "{}", after.body);
    assert_eq!(
        after.body["data"]["result"], 1,
        "the trapped instance must not be reused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_blow_up_answers_5013() {
    let h = host().await;
    let started = Instant::now();
    let r = h.call("misbehaving:hog", json!({})).await;
    assert_eq!((r.status, r.code()), (500, 5013), "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("out of memory"),
        "{}",
        r.body
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(h.call("misbehaving:count", json!({})).await.code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_infinite_loops_time_out_while_other_backends_keep_answering() {
    let h = host().await;
    let started = Instant::now();
    let spin = || h.call("misbehaving:spin", json!({}));
    let neighbours = async {
        let mut ok = 0;
        // Keep calling echo for as long as the loops run.
        while started.elapsed() < Duration::from_millis(900) {
            let r = h.call("echo:say", json!({"text": "still here"})).await;
            assert_eq!(
                r.code(),
                0,
                "a neighbour failed while loops spun: {}",
                r.body
            );
            ok += 1;
        }
        ok
    };
    let (a, b, ok) = tokio::join!(spin(), spin(), neighbours);
    for r in [&a, &b] {
        assert_eq!((r.status, r.code()), (504, 5006), "{}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains("deadline"),
            "{}",
            r.body
        );
    }
    // Generous bound: the deadline is 1 s; the speed figures belong to the benchmark.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        ok >= 5,
        "only {ok} neighbour calls completed while two loops spun"
    );
    let info = h.backend_info("misbehaving").await;
    assert_eq!(counter(&info, "discarded"), 2);
    assert_eq!(h.call("misbehaving:count", json!({})).await.code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_timeout_shorter_than_the_backend_limit_wins() {
    let h = host().await;
    let started = Instant::now();
    let r = h
        .post(
            "/v1/call",
            json!({"tool": "misbehaving:spin", "args": {}, "timeout_ms": 200}),
        )
        .await;
    assert_eq!(r.code(), 5006, "{}", r.body);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_call_leaves_no_broken_instance() {
    let h = host().await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let gone = client
        .post(format!("{}/v1/call", h.url))
        .json(&json!({"tool": "misbehaving:spin", "args": {}}))
        .send()
        .await;
    assert!(gone.is_err(), "the client should have given up");
    // The host notices the dropped connection and discards the instance well before the
    // call's own deadline would have fired.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = h.backend_info("misbehaving").await;
        if counter(&info, "discarded") == 1 && counter(&info, "busy") == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "instance not discarded: {info}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..8 {
        let r = h
            .call("misbehaving:busy", json!({"iterations": 1000}))
            .await;
        assert_eq!(r.code(), 0, "{}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_are_retired_after_n_calls() {
    let mut cfg = bundled("misbehaving");
    cfg.limits.retire_after_calls = 3;
    cfg.limits.pool_max = 1;
    let h = start(vec![("misbehaving", cfg)]).await;
    let counts: Vec<u64> = {
        let mut v = Vec::new();
        for _ in 0..7 {
            v.push(
                h.call("misbehaving:count", json!({})).await.body["data"]["result"]
                    .as_u64()
                    .unwrap(),
            );
        }
        v
    };
    assert_eq!(counts, [1, 2, 3, 1, 2, 3, 1]);
    let info = h.backend_info("misbehaving").await;
    assert_eq!(counter(&info, "retired"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_without_its_own_call_timeout_gets_the_servers_default() {
    let h = wharf_integration_tests::start_with(vec![("m", bundled("misbehaving"))], |s| {
        s.default_call_timeout_ms = 300;
    })
    .await;
    let started = Instant::now();
    let r = h.call("m:spin", json!({})).await;
    assert_eq!(r.code(), 5006, "{}", r.body);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the server's 300 ms default applied, not the 30 s fallback: {:?}",
        started.elapsed()
    );
}

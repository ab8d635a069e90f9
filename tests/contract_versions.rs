//! Backends shipped against `wharf:plugin@0.1.0` and `@0.2.0` keep working beside the
//! current SDK's builds (0.3.0): the `.wasm` files in `tests/fixtures/*-X.Y.Z.wasm` were
//! built by each release's own build (see `tests/fixtures/README.md`) and are loaded here
//! unchanged, next to the bundled backends.

use serde_json::{Value, json};
use std::sync::Arc;
use wharf::config::BackendConfig;
use wharf_integration_tests::{
    TestHost, bundled, containers_labelled, docker_provider, docker_ready, start,
};

fn fixture(name: &str) -> String {
    fixture_of(name, "0.1.0")
}

fn fixture_of(name: &str, version: &str) -> String {
    format!(
        "{}/fixtures/{name}-{version}.wasm",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn old(name: &str) -> BackendConfig {
    BackendConfig::at(fixture(name))
}

async fn session(h: &TestHost, backend: &str, key: &str) -> String {
    let r = h
        .post("/v1/sessions", json!({"backend": backend, "key": key}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

fn result(reply: &wharf_integration_tests::Reply) -> Value {
    assert_eq!(reply.code(), 0, "{}", reply.body);
    reply.body["data"]["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_built_against_0_1_0_and_0_2_0_serve_beside_current_builds() {
    let h = start(vec![
        ("echo_old", old("echo")),
        ("echo", bundled("echo")),
        ("pad_old", old("scratchpad")),
        ("probe_old", old("probe")),
        ("echo_020", BackendConfig::at(fixture_of("echo", "0.2.0"))),
        ("probe_020", BackendConfig::at(fixture_of("probe", "0.2.0"))),
        ("probe", bundled("probe")),
    ])
    .await;
    // A backend's contract is the newest whose interfaces it uses: today's echo uses none
    // of 0.3.0's, today's probe reads secrets.
    for (name, contract) in [
        ("echo_old", "0.1.0"),
        ("echo_020", "0.2.0"),
        ("echo", "0.2.0"),
        ("pad_old", "0.1.0"),
        ("probe_020", "0.2.0"),
        ("probe", "0.3.0"),
    ] {
        let info = h.backend_info(name).await;
        assert_eq!(info["contract"], contract, "{info}");
        assert_eq!(info["wit"], format!("wharf:plugin@{contract}"), "{info}");
    }

    // The same calls give the same answers through the adapters.
    for echo in ["echo_old", "echo_020", "echo"] {
        let said = h
            .call(&format!("{echo}:say"), json!({"text": "ab", "times": 3}))
            .await;
        assert_eq!(result(&said), json!({"text": "ababab"}));
        let bad = h.call(&format!("{echo}:say"), json!({"text": 5})).await;
        assert_eq!(bad.code(), 4004, "{}", bad.body);
        let refused = h
            .call(
                &format!("{echo}:fail"),
                json!({"code": 4001, "message": "no"}),
            )
            .await;
        assert_eq!(
            (refused.code(), refused.body["message"].as_str()),
            (4001, Some("no"))
        );
        let pixel = h.call(&format!("{echo}:pixel"), json!({})).await;
        assert_eq!(
            pixel.body["data"]["attachments"][0]["mime_type"], "image/png",
            "{}",
            pixel.body
        );
    }

    // Session data of a 0.1.0 backend.
    let s = session(&h, "pad_old", "thread-1").await;
    let wrote = h
        .call_in(&s, "pad_old:write", json!({"note": "buy milk"}))
        .await;
    assert_eq!(result(&wrote)["count"], 1);
    let read = h.call_in(&s, "pad_old:read", json!({})).await;
    assert_eq!(result(&read)["notes"], json!(["buy milk"]));

    // The kv import of 0.1.0, served by the 0.2.0 implementation.
    let set = h
        .call(
            "probe_old:kv",
            json!({"scope": "backend", "key": "k", "value": "v1"}),
        )
        .await;
    assert_eq!(result(&set)["value"], "v1");
    let got = h
        .call("probe_old:kv", json!({"scope": "backend", "key": "k"}))
        .await;
    assert_eq!(result(&got)["keys"], json!(["k"]));
    // 0.2.0's kv (atomic increment) from a 0.2.0 build and a 0.3.0 one: one implementation.
    for probe in ["probe_020", "probe"] {
        for (by, total) in [(2, 2), (3, 5)] {
            let added = h
                .call(
                    &format!("{probe}:counter"),
                    json!({"scope": "backend", "key": "n", "by": by}),
                )
                .await;
            assert_eq!(result(&added), json!(total), "{probe}");
        }
    }

    // Backends per contract version, for operators watching deprecations.
    let metrics = reqwest::get(format!("{}/metrics", h.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("wharf_backends_by_contract{contract=\"0.1.0\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("wharf_backends_by_contract{contract=\"0.2.0\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("wharf_backends_by_contract{contract=\"0.3.0\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_names_the_contract_version() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let old = h
        .wharf
        .inspect(std::fs::read(fixture("echo")).unwrap())
        .await
        .unwrap();
    assert_eq!(old.wit, "wharf:plugin@0.1.0");
    let provider = h
        .wharf
        .inspect(std::fs::read(fixture("docker_provider")).unwrap())
        .await
        .unwrap();
    assert_eq!(provider.wit, "wharf:plugin@0.1.0");
    assert!(
        provider.tools.iter().any(|t| t.action == "run_command"),
        "a provider is inspected with the toolset's tools"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_provider_built_against_0_1_0_runs_sandboxes() {
    if !docker_ready() {
        return;
    }
    let mut cfg = docker_provider();
    cfg.path = fixture("docker_provider");
    let h = start(vec![("docker_old", cfg)]).await;
    assert_eq!(h.backend_info("docker_old").await["contract"], "0.1.0");
    let s = session(&h, "docker_old", "old-thread").await;
    assert_eq!(containers_labelled("wharf.session", &s).len(), 1);
    let ran = h
        .call_in(
            &s,
            "docker_old:run_command",
            json!({"command": "echo hi; exit 3"}),
        )
        .await;
    let ran = result(&ran);
    assert_eq!(
        (ran["exit_code"].as_i64(), ran["stdout"].as_str()),
        (Some(3), Some("hi\n"))
    );
    let wrote = h
        .call_in(
            &s,
            "docker_old:write_file",
            json!({"path": "/work/a.txt", "content": "one\ntwo\n"}),
        )
        .await;
    assert_eq!(result(&wrote)["bytes_written"], 8);
    let read = h
        .call_in(
            &s,
            "docker_old:read_file",
            json!({"path": "/work/a.txt", "offset": 2}),
        )
        .await;
    assert_eq!(result(&read)["content"], "two\n");
    let gone = h.delete(&format!("/v1/sessions/{s}")).await;
    assert_eq!(gone.code(), 0, "{}", gone.body);
    assert!(
        containers_labelled("wharf.session", &s).is_empty(),
        "destroy went through the 0.1.0 provider"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_from_0_1_0_to_0_2_0_keeps_sessions() {
    let h = start(vec![("pad", old("scratchpad"))]).await;
    let s = session(&h, "pad", "thread-9").await;
    let wrote = h.call_in(&s, "pad:write", json!({"note": "before"})).await;
    assert_eq!(result(&wrote)["count"], 1);

    let new = wharf::Wharf::read_wasm("bundled:scratchpad").unwrap();
    h.wharf
        .deploy("pad", Arc::new(new), bundled("scratchpad"))
        .await
        .unwrap();
    assert_eq!(h.backend_info("pad").await["contract"], "0.2.0");

    let read = h.call_in(&s, "pad:read", json!({})).await;
    assert_eq!(result(&read)["notes"], json!(["before"]));
    let wrote = h.call_in(&s, "pad:write", json!({"note": "after"})).await;
    assert_eq!(
        result(&wrote)["count"],
        2,
        "the same session, now served by 0.2.0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_0_2_0_surface_increments_and_swaps_atomically() {
    let mut probe = bundled("probe");
    probe.limits.pool_max = 4;
    probe.limits.pool_min = 4;
    let h = Arc::new(start(vec![("probe", probe)]).await);
    // Twenty increments racing across four instances add up exactly.
    let racers: Vec<_> = (0..20)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move {
                h.call(
                    "probe:counter",
                    json!({"scope": "backend", "key": "hits", "by": 1}),
                )
                .await
            })
        })
        .collect();
    let mut seen = Vec::new();
    for r in racers {
        let reply = r.await.unwrap();
        seen.push(result(&reply).as_i64().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (1..=20).collect::<Vec<i64>>(),
        "every increment saw its own value"
    );
    let overflow = h
        .call(
            "probe:counter",
            json!({"scope": "backend", "key": "hits", "by": i64::MAX}),
        )
        .await;
    assert_eq!(overflow.code(), 4000, "{}", overflow.body);

    let swap = |expected: Value, new: Value| {
        let h = h.clone();
        async move {
            let reply = h
                .call(
                    "probe:swap",
                    json!({"scope": "backend", "key": "flag", "expected": expected, "new": new}),
                )
                .await;
            result(&reply).as_bool().unwrap()
        }
    };
    assert!(swap(Value::Null, json!("a")).await, "absent → a");
    assert!(!swap(Value::Null, json!("b")).await, "not absent any more");
    assert!(!swap(json!("x"), json!("b")).await, "not x");
    assert!(swap(json!("a"), json!("b")).await, "a → b");
    assert!(swap(json!("b"), Value::Null).await, "b → deleted");
    assert!(swap(Value::Null, Value::Null).await, "absent, as expected");
}

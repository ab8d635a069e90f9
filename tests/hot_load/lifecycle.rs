//! Sessions across upgrades, and the compile cache across re-drops and restarts.

use super::*;

#[tokio::test]
async fn sessions_survive_an_upgrade_and_rejected_ones_answer_4007() {
    let host = start(vec![
        ("pad", bundled("scratchpad")),
        ("pad2", bundled("echo")),
    ])
    .await;
    let s = host
        .post("/v1/sessions", json!({"backend": "pad", "key": "k"}))
        .await;
    let s = s.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        host.call_in(&s, "pad:write", json!({"note": "buy milk"}))
            .await
            .code(),
        0
    );
    let upgraded = variant(&wasm("scratchpad"), "v2");
    host.wharf
        .deploy("pad", Arc::new(upgraded.clone()), bundled("scratchpad"))
        .await
        .unwrap();
    assert_eq!(
        host.backend_info("pad").await["sha256"],
        sha(&upgraded).as_str()
    );
    let read = host.call_in(&s, "pad:read", json!({})).await;
    assert_eq!(
        read.body["data"]["result"]["notes"],
        json!(["buy milk"]),
        "{}",
        read.body
    );

    // pad2's sessions were made by echo; scratchpad's discover does not recognise them.
    let t = host
        .post("/v1/sessions", json!({"backend": "pad2", "key": "k"}))
        .await;
    let t = t.body["data"]["id"].as_str().unwrap().to_string();
    host.wharf
        .deploy("pad2", Arc::new(wasm("scratchpad")), bundled("scratchpad"))
        .await
        .unwrap();
    let reply = host.call_in(&t, "pad2:read", json!({})).await;
    assert_eq!(reply.code(), 4007, "{}", reply.body);
    assert!(
        reply.body["message"].as_str().unwrap().contains("upgraded"),
        "{}",
        reply.body
    );
    assert_eq!(host.get(&format!("/v1/sessions/{t}")).await.code(), 4007);
    assert_eq!(host.call_in(&s, "pad:read", json!({})).await.code(), 0);
}

/// Drop → first answer of the new backend, cold (compiled) and cached (re-dropped, and
/// after a restart). Run with `--nocapture` for the figures.
#[tokio::test]
async fn the_compile_cache_serves_redrops_and_restarts() {
    let shared = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    let component = variant(&wasm("text-index"), &uuid::Uuid::new_v4().to_string());
    let data_dir = shared.path().to_path_buf();
    let timed_drop = |host: &TestHost| {
        let started = Instant::now();
        drop_file(plugins.path(), "fresh.wasm", &component);
        let url = host.url.clone();
        async move {
            let client = reqwest::Client::new();
            loop {
                let r = client
                    .post(format!("{url}/v1/call"))
                    .json(&json!({"tool": "fresh:stats"}))
                    .send()
                    .await
                    .unwrap();
                let body: Value = r.json().await.unwrap();
                if body["code"] == 0 {
                    return started.elapsed();
                }
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "fresh.wasm never answered"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let first = start_with(vec![], |s| s.data_dir = data_dir.clone()).await;
    let watcher = wharf::hot_reload::watch(first.wharf.clone(), plugins.path().to_path_buf())
        .await
        .unwrap();
    let cold = timed_drop(&first).await;
    assert_eq!(
        first.wharf.backend("fresh").unwrap().cache,
        CacheOutcome::Compiled
    );
    std::fs::remove_file(plugins.path().join("fresh.wasm")).unwrap();
    wait_for("the unload", Duration::from_secs(30), || async {
        first.call("fresh:stats", json!({})).await.code() == 5011
    })
    .await;
    let redropped = timed_drop(&first).await;
    assert_eq!(
        first.wharf.backend("fresh").unwrap().cache,
        CacheOutcome::Hit
    );
    drop(watcher);
    drop(first);

    let started = Instant::now();
    let second = start_with(vec![], |s| s.data_dir = data_dir.clone()).await;
    let _watcher = wharf::hot_reload::watch(second.wharf.clone(), plugins.path().to_path_buf())
        .await
        .unwrap();
    let restarted = started.elapsed();
    assert_eq!(
        second.wharf.backend("fresh").unwrap().cache,
        CacheOutcome::Hit,
        "a restart does not recompile"
    );
    assert_eq!(second.call("fresh:stats", json!({})).await.code(), 0);
    eprintln!(
        "drop → first answer: cold {} ms, cached re-drop {} ms; restart with the file present (host + load) {} ms",
        cold.as_millis(),
        redropped.as_millis(),
        restarted.as_millis()
    );
}

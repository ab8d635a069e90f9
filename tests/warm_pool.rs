//! Warm sandboxes (ARCHITECTURE.md, "Warm sandboxes") with the docker provider against the
//! real Docker engine: a session of a pooled shape takes a container that existed before
//! it asked, another shape gets a fresh one, racing sessions never share one, one killed
//! while idle is replaced and never handed out, unloading the backend empties the pool,
//! two nodes on one store never hand one out twice nor sweep a taken one, and a host
//! killed with SIGKILL leaves no pooled container once restarted and swept.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use wharf::config::WarmPoolConfig;
use wharf_integration_tests::processes::{WharfProcess, store_urls};
use wharf_integration_tests::{TestHost, docker_provider, docker_ready, eventually, start_with};

/// How long a pool may take to fill on a loaded machine.
const FILLED_WITHIN: Duration = Duration::from_secs(60);

fn pooled(size: u32) -> wharf::config::BackendConfig {
    let mut cfg = docker_provider();
    cfg.grants.max_containers = 64;
    cfg.warm_pool = Some(WarmPoolConfig {
        size,
        ..WarmPoolConfig::default()
    });
    cfg
}

async fn host(name: &str, size: u32) -> TestHost {
    start_with(vec![(name, pooled(size))], |s| s.sweep_interval_seconds = 1).await
}

/// Container ids (running or not) of `backend`'s pool made by `node`.
fn pool_containers(backend: &str, node: &str) -> BTreeSet<String> {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--no-trunc", "--filter"])
        .arg(format!("label=wharf.pool={backend}"))
        .arg("--filter")
        .arg(format!("label=wharf.node={node}"))
        .output()
        .expect("docker ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn running(id: &str) -> bool {
    let out = Command::new("docker")
        .args(["inspect", "--format", "{{.State.Running}}", id])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

/// Waits until `backend`'s pool on `node` holds `n` running containers; returns them.
async fn filled(backend: &str, node: &str, n: usize) -> BTreeSet<String> {
    let deadline = Instant::now() + FILLED_WITHIN;
    loop {
        let now: BTreeSet<String> = pool_containers(backend, node)
            .into_iter()
            .filter(|c| running(c))
            .collect();
        if now.len() >= n {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the pool of {backend} holds {} of {n}",
            now.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn session(h: &TestHost, backend: &str, config: Value) -> (String, String) {
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": backend, "config": config}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let data = &r.body["data"];
    (
        data["id"].as_str().unwrap().to_string(),
        data["data"]["sandbox"].as_str().unwrap().to_string(),
    )
}

fn remove_all(ids: impl IntoIterator<Item = String>) {
    for id in ids {
        let _ = Command::new("docker").args(["rm", "-f", &id]).output();
    }
}

/// Removes a test's containers (pooled or not) of `node` when the test ends, also when it
/// fails half-way (other tests share the Docker engine).
struct Leftovers(String);

impl Drop for Leftovers {
    fn drop(&mut self) {
        remove_all(wharf_integration_tests::containers_labelled(
            "wharf.node",
            &self.0,
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_shape_takes_a_warm_sandbox_and_another_shape_gets_a_fresh_one() {
    if !docker_ready() {
        return;
    }
    let backend = "warm-match";
    let h = host(backend, 2).await;
    let node = h.wharf.node_id().to_string();
    let _leftovers = Leftovers(node.clone());
    let before = filled(backend, &node, 2).await;
    // `/v1/backends` (and the console's Backends page) shows the pool's fill.
    eventually(30, "the pool's fill was never 2 of 2", async || {
        h.backend_info(backend).await["warm_pool"] == json!({"idle": 2, "size": 2})
    })
    .await;

    let (s, sandbox) = session(&h, backend, Value::Null).await;
    assert!(
        before.contains(&sandbox),
        "the session got {sandbox}, not one of the warm {before:?}"
    );
    let r = h
        .call_in(
            &s,
            &format!("{backend}:run_command"),
            json!({"command": "echo warm"}),
        )
        .await;
    assert_eq!(r.body["data"]["result"]["stdout"], "warm\n", "{}", r.body);

    let (other, fresh) = session(&h, backend, json!({"env": {"SHAPE": "other"}})).await;
    assert!(!before.contains(&fresh), "another shape got a warm sandbox");
    assert!(!pool_containers(backend, &node).contains(&fresh));

    let metrics = reqwest::get(format!("{}/metrics", h.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "wharf_warm_pool_hits_total{{backend=\"{backend}\"}} 1"
        )),
        "{metrics}"
    );

    // The pool refills behind the take; the taken one goes with its session.
    let refilled = filled(backend, &node, 3).await;
    assert!(refilled.contains(&sandbox));
    for id in [&s, &other] {
        let r = h.delete(&format!("/v1/sessions/{id}")).await;
        assert_eq!(r.code(), 0, "{}", r.body);
    }
    assert!(!running(&sandbox), "the taken sandbox outlived its session");
    h.wharf.unload_backend(backend).await.unwrap();
    assert_eq!(pool_containers(backend, &node), BTreeSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_acquires_never_get_the_same_sandbox() {
    if !docker_ready() {
        return;
    }
    let backend = "warm-race";
    let h = host(backend, 4).await;
    let node = h.wharf.node_id().to_string();
    let _leftovers = Leftovers(node.clone());
    let warm = filled(backend, &node, 4).await;
    let sessions =
        futures::future::join_all((0..12).map(|_| session(&h, backend, Value::Null))).await;
    let sandboxes: BTreeSet<&String> = sessions.iter().map(|(_, sandbox)| sandbox).collect();
    assert_eq!(
        sandboxes.len(),
        sessions.len(),
        "a sandbox went to two sessions"
    );
    let hits = sandboxes.iter().filter(|s| warm.contains(**s)).count();
    assert!((1..=4).contains(&hits), "{hits} warm hits from a pool of 4");
    for (id, _) in &sessions {
        h.delete(&format!("/v1/sessions/{id}")).await;
    }
    h.wharf.unload_backend(backend).await.unwrap();
    assert_eq!(pool_containers(backend, &node), BTreeSet::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_does_not_declare_poolable_gets_no_pool() {
    let h = start_with(vec![], |_| {}).await;
    let mut cfg = wharf_integration_tests::bundled("remote-provider");
    cfg.warm_pool = Some(WarmPoolConfig {
        size: 1,
        ..WarmPoolConfig::default()
    });
    let wasm = wharf::Wharf::read_wasm("bundled:remote-provider").unwrap();
    let refused = h
        .wharf
        .deploy("remote", std::sync::Arc::new(wasm.clone()), cfg.clone())
        .await
        .expect_err("a warm pool for a provider that is not poolable");
    assert!(refused.message.contains("poolable"), "{}", refused.message);
    cfg.warm_pool = None;
    let mut config = toml::Table::new();
    config.insert("base_url".into(), "http://127.0.0.1:9".into());
    cfg.config = Some(toml::Value::Table(config));
    h.wharf
        .deploy("remote", std::sync::Arc::new(wasm), cfg)
        .await
        .expect("the same provider without a pool loads");
    let listed = h.backend_info("remote").await;
    assert_eq!(listed["name"], "remote", "{listed}");
    assert!(listed["warm_pool"].is_null(), "no pool, no fill: {listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_store_never_hand_out_one_sandbox_twice_nor_sweep_a_taken_one() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, url) in store_urls(dir.path()) {
        let backend = format!("warm-nodes-{engine}");
        let node = |url: String, backend: String| async move {
            start_with(vec![(backend.as_str(), pooled(3))], move |s| {
                s.store_url = Some(url);
                s.sweep_interval_seconds = 1;
                s.lease_seconds = 2;
            })
            .await
        };
        let one = node(url.clone(), backend.clone()).await;
        let two = node(url.clone(), backend.clone()).await;
        let (n1, n2) = (
            one.wharf.node_id().to_string(),
            two.wharf.node_id().to_string(),
        );
        let _leftovers = (Leftovers(n1.clone()), Leftovers(n2.clone()));
        let warm: BTreeSet<String> = filled(&backend, &n1, 3)
            .await
            .into_iter()
            .chain(filled(&backend, &n2, 3).await)
            .collect();
        let sessions = futures::future::join_all((0..10).map(|i| {
            let host = if i % 2 == 0 { &one } else { &two };
            session(host, &backend, Value::Null)
        }))
        .await;
        let sandboxes: BTreeSet<&String> = sessions.iter().map(|(_, sandbox)| sandbox).collect();
        assert_eq!(
            sandboxes.len(),
            sessions.len(),
            "{engine}: a sandbox went to two sessions"
        );
        let hits = sandboxes.iter().filter(|s| warm.contains(**s)).count();
        assert!(hits >= 2, "{engine}: {hits} warm hits from two pools of 3");
        // Both sweepers run every second with 2 s leases: a taken sandbox is its session's,
        // never swept as a pool's leftover by either node.
        tokio::time::sleep(Duration::from_secs(4)).await;
        for (i, (id, sandbox)) in sessions.iter().enumerate() {
            assert!(
                running(sandbox),
                "{engine}: the sandbox of session {id} was swept"
            );
            let host = if i % 2 == 0 { &one } else { &two };
            let r = host
                .call_in(
                    id,
                    &format!("{backend}:run_command"),
                    json!({"command": "echo ok"}),
                )
                .await;
            assert_eq!(
                r.body["data"]["result"]["stdout"], "ok\n",
                "{engine}: {}",
                r.body
            );
        }
        for (i, (id, _)) in sessions.iter().enumerate() {
            let host = if i % 2 == 0 { &one } else { &two };
            host.delete(&format!("/v1/sessions/{id}")).await;
        }
        one.wharf.unload_backend(&backend).await.unwrap();
        two.wharf.unload_backend(&backend).await.unwrap();
        assert_eq!(pool_containers(&backend, &n1), BTreeSet::new(), "{engine}");
        assert_eq!(pool_containers(&backend, &n2), BTreeSet::new(), "{engine}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_sandbox_killed_while_idle_is_replaced_and_never_handed_out() {
    if !docker_ready() {
        return;
    }
    let backend = "warm-killed";
    let h = host(backend, 1).await;
    let node = h.wharf.node_id().to_string();
    let _leftovers = Leftovers(node.clone());
    let warm = filled(backend, &node, 1).await;
    for id in &warm {
        let out = Command::new("docker").args(["kill", id]).output().unwrap();
        assert!(out.status.success());
    }
    let (s, sandbox) = session(&h, backend, Value::Null).await;
    assert!(
        !warm.contains(&sandbox),
        "a dead warm sandbox was handed out"
    );
    let r = h
        .call_in(
            &s,
            &format!("{backend}:run_command"),
            json!({"command": "echo alive"}),
        )
        .await;
    assert_eq!(r.body["data"]["result"]["stdout"], "alive\n", "{}", r.body);
    // Replaced by a live one; the dead one is destroyed.
    let deadline = Instant::now() + FILLED_WITHIN;
    loop {
        let now = pool_containers(backend, &node);
        let live: Vec<&String> = now
            .iter()
            .filter(|c| !warm.contains(*c) && **c != sandbox && running(c))
            .collect();
        if live.len() == 1 && now.iter().all(|c| !warm.contains(c)) {
            break;
        }
        assert!(Instant::now() < deadline, "not replaced: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h.delete(&format!("/v1/sessions/{s}")).await;
    h.wharf.unload_backend(backend).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_the_backend_empties_its_pool() {
    if !docker_ready() {
        return;
    }
    let backend = "warm-unload";
    let h = host(backend, 3).await;
    let node = h.wharf.node_id().to_string();
    let _leftovers = Leftovers(node.clone());
    filled(backend, &node, 3).await;
    assert!(h.wharf.unload_backend(backend).await.unwrap());
    assert_eq!(pool_containers(backend, &node), BTreeSet::new());
    let leftover: i64 = {
        let store = wharf::store::StateStore::open(&format!(
            "sqlite://{}",
            h.data_dir.path().join("wharf.db").display()
        ))
        .await
        .unwrap();
        store.stale_warm("nobody", i64::MAX).await.unwrap().len() as i64
    };
    assert_eq!(leftover, 0, "rows of the unloaded pool are left");
}

fn write_config(dir: &Path, node: &str, store: &str) -> PathBuf {
    let data = dir.join(node);
    std::fs::create_dir_all(&data).unwrap();
    let path = dir.join(format!("{node}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"
lease_seconds = 2
sweep_interval_seconds = 1

[store]
url = "{store}"

[backends.warm-crash]
path = "bundled:docker-provider"
[backends.warm-crash.grants]
images = ["wharf-sandbox:test"]
max_containers = 64
[backends.warm-crash.warm_pool]
size = 3
"#,
            data.display()
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_leaves_no_pooled_container_after_restart_and_sweep() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, url) in store_urls(dir.path()) {
        let name = format!("warm-crash-{engine}");
        let config = write_config(dir.path(), &name, &url);
        let first = WharfProcess::start(&config);
        let node = std::fs::read_to_string(dir.path().join(&name).join("node-id"))
            .unwrap()
            .trim()
            .to_string();
        let _leftovers = Leftovers(node.clone());
        let before = filled("warm-crash", &node, 3).await;
        first.kill9();

        let second = WharfProcess::start(&config);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = pool_containers("warm-crash", &node);
            let left: Vec<&String> = before.iter().filter(|c| now.contains(*c)).collect();
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{engine}: pooled containers of the killed host are left: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // The restarted host keeps a pool of its own, and a clean stop destroys it.
        filled("warm-crash", &node, 3).await;
        assert!(second.terminate(Duration::from_secs(60)), "{engine}: stop");
        let left = pool_containers("warm-crash", &node);
        remove_all(left.clone());
        assert_eq!(
            left,
            BTreeSet::new(),
            "{engine}: a stopped host left its pool"
        );
    }
}

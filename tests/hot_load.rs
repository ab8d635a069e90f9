//! Hot loading: replacing a backend under load loses no call; the plugins directory loads,
//! upgrades and unloads; bad components are refused while the old version serves; unload
//! drains then answers 5011; an upgrade declaring more capabilities, or a sidecar granting
//! more, waits for an admin (narrower grants do not); admin routes need an admin token; a
//! pinned sha256 is enforced; sessions survive an upgrade; the compile cache serves
//! re-drops and restarts.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wharf::config::{BackendConfig, TokenScope};
use wharf::front_door::Deployment;
use wharf::runtime::compile_cache::CacheOutcome;
use wharf_integration_tests::{TestHost, bundled, start, start_with, token};

#[path = "hot_load/admin.rs"]
mod admin;
#[path = "hot_load/grants.rs"]
mod grants;
#[path = "hot_load/lifecycle.rs"]
mod lifecycle;

const ADMIN: &str = "t-admin";
const AGENT: &str = "t-agent";

fn wasm(name: &str) -> Vec<u8> {
    wharf::bundled::wasm(name).expect("bundled").to_vec()
}

/// The same component with a custom section appended: different bytes (and sha256), same
/// behaviour, so it is a different component that keeps every tool name.
fn variant(wasm: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"wharf-test-variant";
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(tag.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    leb(content.len(), &mut out);
    out.extend(content);
    out
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A text-index config whose one extra document (`id`) tells which version answered.
fn index_config(id: &str) -> BackendConfig {
    let mut cfg = bundled("text-index");
    cfg.config = Some(
        toml::from_str(&format!(
            "documents = [{{ id = \"{id}\", text = \"zebra quagga\" }}]"
        ))
        .unwrap(),
    );
    cfg
}

/// A host with an admin token and an agent token (read + call).
async fn admin_host(backends: Vec<(&str, BackendConfig)>) -> TestHost {
    start_with(backends, |s| {
        s.auth.tokens = vec![
            token("ops", ADMIN, &[TokenScope::Admin]),
            token("agent", AGENT, &[TokenScope::Read, TokenScope::Call]),
        ];
    })
    .await
}

async fn send(request: reqwest::RequestBuilder, bearer: Option<&str>) -> (u16, Value) {
    let request = match bearer {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, body)
}

async fn put_wasm(
    host: &TestHost,
    name: &str,
    bytes: Vec<u8>,
    bearer: Option<&str>,
) -> (u16, Value) {
    let url = format!("{}/v1/admin/backends/{name}", host.url);
    send(reqwest::Client::new().put(url).body(bytes), bearer).await
}

async fn admin_post(host: &TestHost, path: &str, bearer: Option<&str>) -> (u16, Value) {
    send(
        reqwest::Client::new().post(format!("{}{path}", host.url)),
        bearer,
    )
    .await
}

async fn call_as(host: &TestHost, bearer: &str, tool: &str, args: Value) -> (u16, Value) {
    let req = reqwest::Client::new()
        .post(format!("{}/v1/call", host.url))
        .json(&json!({ "tool": tool, "args": args }));
    send(req, Some(bearer)).await
}

async fn backends_as(host: &TestHost, bearer: &str) -> Value {
    let req = reqwest::Client::new().get(format!("{}/v1/backends", host.url));
    send(req, Some(bearer)).await.1["data"].clone()
}

/// Polls `check` every 20 ms until it holds; panics after `limit`.
async fn wait_for<F, Fut>(what: &str, limit: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// Writes a file the way a deploy tool should: to a temporary name, then renamed.
fn drop_file(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.part"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Two different components (text-index, and text-index with an extra custom section)
/// that share the tool `search`, configured with a document naming their version: eight
/// clients search without pause while the backend is replaced ten times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_under_load_loses_no_call() {
    let host = Arc::new(start(vec![("idx", index_config("version-0"))]).await);
    let a = wasm("text-index");
    let b = variant(&a, "b");
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (host, stop, calls, failures) =
            (host.clone(), stop.clone(), calls.clone(), failures.clone());
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let reply = host.call("idx:search", json!({ "query": "quagga" })).await;
                calls.fetch_add(1, Ordering::Relaxed);
                if reply.code() != 0 {
                    failures.lock().unwrap().push(reply.body.to_string());
                }
            }
        }));
    }
    // Steady state first, for the calls/s comparison printed below.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (steady_calls, steady_started) = (calls.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let steady_rate = (calls.load(Ordering::Relaxed) - steady_calls) as f64
        / steady_started.elapsed().as_secs_f64();
    let (swap_calls, swaps_started) = (calls.load(Ordering::Relaxed), Instant::now());
    let mut old_pools = Vec::new();
    let mut first_answers = Vec::new();
    for round in 1..=10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        old_pools.push(host.wharf.backend("idx").unwrap().behaviour().pool());
        let id = format!("version-{round}");
        let bytes = if round % 2 == 0 { a.clone() } else { b.clone() };
        let started = Instant::now();
        let deployed = host
            .wharf
            .deploy("idx", Arc::new(bytes), index_config(&id))
            .await
            .unwrap();
        assert!(
            matches!(deployed, Deployment::Active(_)),
            "a same-permission upgrade is active at once"
        );
        let swapped = started.elapsed();
        let host2 = host.clone();
        wait_for(&format!("{id} to answer"), Duration::from_secs(10), || {
            let (host, id) = (host2.clone(), id.clone());
            async move {
                let reply = host.call("idx:search", json!({ "query": "quagga" })).await;
                reply.body["data"]["result"][0]["id"] == id.as_str()
            }
        })
        .await;
        first_answers.push((swapped, started.elapsed()));
    }
    let swap_rate =
        (calls.load(Ordering::Relaxed) - swap_calls) as f64 / swaps_started.elapsed().as_secs_f64();
    eprintln!(
        "calls/s: steady {steady_rate:.0}, during 10 swaps {swap_rate:.0} ({:.2}x)",
        swap_rate / steady_rate
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    let total = calls.load(Ordering::Relaxed);
    eprintln!(
        "hot swap under load: {total} calls, {} failed; per swap (deploy returned, new version answered): {first_answers:?}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} calls failed, e.g. {}",
        failures.len(),
        failures[0]
    );
    assert!(total > 100, "the clients made only {total} calls");
    // Every replaced version was drained: idle instances shut down, none kept.
    wait_for("old versions to drain", Duration::from_secs(20), || {
        let done = old_pools
            .iter()
            .all(|p| p.is_draining() && p.status().idle == 0);
        async move { done }
    })
    .await;
    let info = host.backend_info("idx").await;
    assert_eq!(info["sha256"], sha(&a));
    assert!(
        info["last_error"].is_null() && info["pending"].is_null(),
        "{info}"
    );
}

#[tokio::test]
async fn the_plugins_directory_loads_upgrades_and_unloads() {
    let host = start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let echo = wasm("echo");
    drop_file(dir.path(), "early.wasm", &echo);
    let _watcher = wharf::hot_reload::watch(host.wharf.clone(), dir.path().to_path_buf())
        .await
        .unwrap();
    assert_eq!(
        host.call("early:say", json!({"text": "hi"})).await.code(),
        0,
        "present at start: loaded at start"
    );

    drop_file(dir.path(), "late.wasm", &echo);
    wait_for("late.wasm to load", Duration::from_secs(30), || async {
        host.call("late:say", json!({"text": "hi"})).await.code() == 0
    })
    .await;

    // Replace the component and give it settings: one upgrade.
    let upgraded = variant(&echo, "v2");
    let sidecar = format!("sha256 = \"{}\"\n[limits]\npool_max = 4\n", sha(&upgraded));
    std::fs::write(dir.path().join("late.toml"), sidecar).unwrap();
    drop_file(dir.path(), "late.wasm", &upgraded);
    wait_for("the upgrade", Duration::from_secs(30), || async {
        let info = host.backend_info("late").await;
        info["sha256"] == sha(&upgraded).as_str() && info["limits"]["pool_max"] == 4
    })
    .await;

    // A broken replacement is refused; the running version keeps serving.
    drop_file(dir.path(), "late.wasm", b"\0asm garbage");
    wait_for("the refusal to show", Duration::from_secs(30), || async {
        !host.backend_info("late").await["last_error"].is_null()
    })
    .await;
    let info = host.backend_info("late").await;
    assert_eq!(info["sha256"], sha(&upgraded).as_str(), "{info}");
    assert_eq!(
        host.call("late:say", json!({"text": "still"})).await.code(),
        0
    );

    // Names never loaded are listed as rejected, with the reason.
    drop_file(dir.path(), "broken.wasm", b"not wasm at all");
    std::fs::write(
        dir.path().join("pinned.toml"),
        format!("sha256 = \"{}\"\n", "0".repeat(64)),
    )
    .unwrap();
    drop_file(dir.path(), "pinned.wasm", &echo);
    wait_for("both refusals", Duration::from_secs(30), || async {
        host.get("/v1/backends").await.body["data"]["rejected"]
            .as_array()
            .is_some_and(|r| r.len() == 2)
    })
    .await;
    let rejected = host.get("/v1/backends").await.body["data"]["rejected"].clone();
    let reason = |name: &str| {
        rejected
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        reason("pinned").contains("integrity check failed"),
        "{rejected}"
    );
    assert!(!reason("broken").is_empty());
    assert!(host.backend_info("pinned").await.is_null());

    // Deleting the file unloads the backend: calls answer 5011.
    std::fs::remove_file(dir.path().join("late.wasm")).unwrap();
    wait_for("the unload", Duration::from_secs(30), || async {
        host.call("late:say", json!({"text": "hi"})).await.code() == 5011
    })
    .await;
    let reply = host.call("late:say", json!({"text": "hi"})).await;
    assert_eq!(reply.status, 503);
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("not loaded"),
        "{}",
        reply.body
    );
    assert_eq!(
        host.call("early:say", json!({"text": "hi"})).await.code(),
        0
    );
}

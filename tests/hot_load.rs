//! Hot loading: replacing a backend under load loses no call; the plugins directory loads,
//! upgrades and unloads; bad components are refused while the old version serves; unload
//! drains then answers 5011; an upgrade declaring more capabilities waits for an admin;
//! admin routes need an admin token; a pinned sha256 is enforced; sessions survive an
//! upgrade; the compile cache serves re-drops and restarts.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wharf::config::{BackendConfig, TokenConfig, TokenScope};
use wharf::front_door::Deployed;
use wharf::runtime::compile_cache::CacheOutcome;
use wharf_integration_tests::{TestHost, bundled, start, start_with};

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

fn token(name: &str, value: &str, scopes: Vec<TokenScope>) -> TokenConfig {
    TokenConfig {
        name: name.into(),
        value: Some(value.into()),
        value_file: None,
        scopes,
        backends: None,
        tools: None,
    }
}

/// A host with an admin token and an agent token (read + call).
async fn admin_host(backends: Vec<(&str, BackendConfig)>) -> TestHost {
    start_with(backends, |s| {
        s.auth.tokens = vec![
            token("ops", ADMIN, vec![TokenScope::Admin]),
            token("agent", AGENT, vec![TokenScope::Read, TokenScope::Call]),
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
    let mut old_pools = Vec::new();
    let mut first_answers = Vec::new();
    for round in 1..=10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        old_pools.push(host.wharf.backend("idx").unwrap().pool.clone());
        let id = format!("version-{round}");
        let bytes = if round % 2 == 0 { a.clone() } else { b.clone() };
        let started = Instant::now();
        let deployed = host
            .wharf
            .deploy("idx", Arc::new(bytes), index_config(&id))
            .await
            .unwrap();
        assert!(
            matches!(deployed, Deployed::Active(_)),
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
            .all(|p| p.is_draining() && p.idle_count() == 0);
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

#[tokio::test]
async fn a_bad_upgrade_leaves_the_old_version_serving() {
    let host = admin_host(vec![
        ("echo", bundled("echo")),
        ("idx", index_config("good")),
    ])
    .await;
    // Not a component at all.
    let (status, body) = put_wasm(&host, "echo", b"garbage".to_vec(), Some(ADMIN)).await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4000)), "{body}");
    // A component built against a WIT version this host does not know.
    let future = wat::parse_str(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func $f (canon lift (core func $i "f")))
             (instance $api (export "describe" (func $f)))
             (export "wharf:plugin/backend@0.2.0" (instance $api)))"#,
    )
    .unwrap();
    let (_, body) = put_wasm(&host, "echo", future, Some(ADMIN)).await;
    assert_eq!(body["code"], 4000, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("wharf:plugin@0.2.0"),
        "{body}"
    );
    let (_, reply) = call_as(&host, AGENT, "echo:say", json!({"text": "ok"})).await;
    assert_eq!(
        reply["data"]["result"]["text"], "ok",
        "the old version serves"
    );
    let listed = backends_as(&host, AGENT).await;
    let echo = listed["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "echo")
        .unwrap();
    assert!(
        echo["last_error"]["reason"]
            .as_str()
            .unwrap()
            .contains("wharf:plugin@0.2.0"),
        "{echo}"
    );
    assert_eq!(echo["last_error"]["sha256"].as_str().unwrap().len(), 64);

    // A warmup that fails (the config is not what the index expects).
    let mut bad = bundled("text-index");
    bad.config = Some(toml::from_str("documents = \"not a list\"").unwrap());
    let err = host
        .wharf
        .deploy("idx", Arc::new(wasm("text-index")), bad)
        .await
        .unwrap_err();
    assert_eq!(err.code.as_u32(), 4000);
    assert!(err.message.contains("warmup"), "{}", err.message);
    let (_, reply) = call_as(&host, AGENT, "idx:search", json!({"query": "quagga"})).await;
    assert_eq!(reply["data"]["result"][0]["id"], "good", "{reply}");

    // A good upload clears the error.
    let (_, body) = put_wasm(&host, "echo", variant(&wasm("echo"), "fixed"), Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert!(body["data"]["last_error"].is_null(), "{body}");
}

#[tokio::test]
async fn unload_drains_then_answers_5011() {
    let host = Arc::new(admin_host(vec![("slow", bundled("misbehaving"))]).await);
    let pool = host.wharf.backend("slow").unwrap().pool.clone();
    let busy = {
        let host = host.clone();
        tokio::spawn(async move {
            call_as(
                &host,
                AGENT,
                "slow:busy",
                json!({"iterations": 1_500_000_000u64}),
            )
            .await
        })
    };
    wait_for("the call to start", Duration::from_secs(10), || {
        let pool = pool.clone();
        async move { pool.stats.busy.load(Ordering::Relaxed) == 1 }
    })
    .await;
    let url = format!("{}/v1/admin/backends/slow", host.url);
    let (status, body) = send(reqwest::Client::new().delete(url), Some(ADMIN)).await;
    assert_eq!(
        (status, body["data"]["unloaded"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(
        pool.stats.busy.load(Ordering::Relaxed),
        0,
        "the unload waited for the call in flight"
    );
    let (_, finished) = busy.await.unwrap();
    assert_eq!(
        finished["code"], 0,
        "the call in flight finished on the old version: {finished}"
    );
    let (status, reply) = call_as(&host, AGENT, "slow:count", json!({})).await;
    assert_eq!(
        (status, reply["code"].as_u64()),
        (503, Some(5011)),
        "{reply}"
    );
    assert!(
        pool.is_draining() && pool.idle_count() == 0,
        "old instances were shut down"
    );
}

/// An instance still out when its pool drains is shut down when it comes back, not kept.
#[tokio::test]
async fn an_instance_checked_in_after_the_drain_is_not_kept() {
    let host = start(vec![("echo", bundled("echo"))]).await;
    let pool = host.wharf.backend("echo").unwrap().pool.clone();
    let out = pool.checkout(Default::default()).await.unwrap();
    pool.drain().await;
    assert!(pool.is_draining());
    assert_eq!(pool.idle_count(), 0);
    out.checkin();
    assert_eq!(pool.idle_count(), 0, "a drained pool keeps nothing");
    assert_eq!(
        pool.stats.retired.load(Ordering::Relaxed),
        1,
        "it was retired (shut down)"
    );
    assert!(
        pool.checkout(Default::default()).await.is_err(),
        "no new checkouts"
    );
}

#[tokio::test]
async fn an_escalating_upgrade_waits_for_approval() {
    let host = admin_host(vec![("tool", bundled("echo"))]).await;
    // A first load is never pending, whatever it declares.
    let (_, body) = put_wasm(&host, "fresh", wasm("probe"), Some(ADMIN)).await;
    assert_eq!(
        (body["code"].as_u64(), body["data"]["state"].as_str()),
        (Some(0), Some("ready")),
        "{body}"
    );

    let (_, body) = put_wasm(&host, "tool", wasm("probe"), Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["data"]["state"], "pending", "{body}");
    assert_eq!(
        body["data"]["pending"]["added"]["images"],
        json!(["wharf-sandbox:*"])
    );
    assert_eq!(
        body["data"]["pending"]["added"]["http_hosts"],
        json!(["*:*"])
    );
    let (_, reply) = call_as(&host, AGENT, "tool:say", json!({"text": "still echo"})).await;
    assert_eq!(reply["code"], 0, "the running version serves: {reply}");
    let listed = backends_as(&host, AGENT).await;
    let entry = listed["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(entry["declared_name"], "echo");
    assert_eq!(entry["pending"]["version"], "0.1.0", "{entry}");
    assert_eq!(
        entry["pending"]["added"]["images"],
        json!(["wharf-sandbox:*"]),
        "{entry}"
    );

    let (status, _) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(AGENT)).await;
    assert_eq!(status, 403);
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["data"]["declared_name"], "probe");
    assert!(body["data"]["pending"].is_null());
    let tools = send(
        reqwest::Client::new().get(format!("{}/v1/tools", host.url)),
        Some(AGENT),
    )
    .await
    .1;
    let names: Vec<&str> = tools["data"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"tool:kv") && !names.contains(&"tool:say"),
        "{names:?}"
    );
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(ADMIN)).await;
    assert_eq!(body["code"], 4002, "nothing left to approve: {body}");
}

#[tokio::test]
async fn admin_routes_need_an_admin_token() {
    let host = admin_host(vec![("echo", bundled("echo"))]).await;
    let (status, _) = put_wasm(&host, "echo", wasm("echo"), None).await;
    assert_eq!(status, 401);
    let (status, body) = put_wasm(&host, "echo", wasm("echo"), Some(AGENT)).await;
    assert_eq!((status, body["code"].as_u64()), (403, Some(4030)), "{body}");
    let url = format!("{}/v1/admin/backends/echo", host.url);
    let (status, _) = send(reqwest::Client::new().delete(&url), Some(AGENT)).await;
    assert_eq!(status, 403);
    let (status, _) = send(reqwest::Client::new().delete(&url), None).await;
    assert_eq!(status, 401);
    let (status, _) = admin_post(&host, "/v1/admin/backends/echo/approve", None).await;
    assert_eq!(status, 401);
    assert_eq!(
        call_as(&host, AGENT, "echo:ping", json!({})).await.1["code"],
        0,
        "nothing was unloaded"
    );

    // Without an admin token configured the routes do not exist.
    let open = start(vec![("echo", bundled("echo"))]).await;
    let (status, body) = put_wasm(&open, "echo", wasm("echo"), None).await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4002)), "{body}");
    assert_eq!(open.delete("/v1/admin/backends/echo").await.code(), 4002);
    assert_eq!(open.call("echo:ping", json!({})).await.code(), 0);
}

#[tokio::test]
async fn a_sha256_mismatch_is_refused() {
    let host = admin_host(vec![]).await;
    let mut pinned = bundled("echo");
    pinned.sha256 = Some("ab".repeat(32));
    let err = host
        .wharf
        .load_backend("pinned", pinned.clone())
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("integrity check failed"),
        "{err:#}"
    );
    assert!(format!("{err:#}").contains(&sha(&wasm("echo"))), "{err:#}");
    pinned.sha256 = Some(sha(&wasm("echo")).to_uppercase());
    host.wharf.load_backend("pinned", pinned).await.unwrap();

    let url = format!(
        "{}/v1/admin/backends/up?sha256={}",
        host.url,
        "cd".repeat(32)
    );
    let (status, body) = send(
        reqwest::Client::new().put(url).body(wasm("echo")),
        Some(ADMIN),
    )
    .await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4000)), "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("integrity check failed"),
        "{body}"
    );
    let url = format!(
        "{}/v1/admin/backends/up?sha256={}",
        host.url,
        sha(&wasm("echo"))
    );
    let (_, body) = send(
        reqwest::Client::new().put(url).body(wasm("echo")),
        Some(ADMIN),
    )
    .await;
    assert_eq!(body["code"], 0, "{body}");
}

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

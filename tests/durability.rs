//! Durable sessions against both engines (a shared SQLite file, and PostgreSQL when
//! `WHARF_TEST_POSTGRES_URL` is set): one session per key across two processes, recovery
//! after kill -9, stale records, orphan reaping, idle TTLs, claims, and a store outage.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wharf_integration_tests::processes::{WharfProcess, store_urls};
use wharf_integration_tests::{
    bundled, containers_labelled, docker_provider, docker_ready, start_with,
};

fn write_config(dir: &Path, node: &str, store: &str) -> PathBuf {
    let data = dir.join(node);
    std::fs::create_dir_all(&data).unwrap();
    let path = dir.join(format!("{node}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"

[store]
url = "{store}"

[backends.docker]
path = "bundled:docker-provider"
[backends.docker.grants]
images = ["wharf-sandbox:test"]
max_containers = 64

[backends.scratchpad]
path = "bundled:scratchpad"
"#,
            data.display()
        ),
    )
    .unwrap();
    path
}

async fn post(url: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn get(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_acquires_across_two_processes_make_one_session_and_one_container() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let a = WharfProcess::start(&write_config(dir.path(), &format!("a-{engine}"), &store));
        let b = WharfProcess::start(&write_config(dir.path(), &format!("b-{engine}"), &store));
        let key = format!("shared-{engine}");
        let replies = futures::future::join_all((0..20).map(|i| {
            let url = if i % 2 == 0 { &a.url } else { &b.url };
            let key = key.clone();
            async move {
                post(
                    &format!("{url}/v1/sessions"),
                    json!({"backend": "docker", "key": key}),
                )
                .await
            }
        }))
        .await;
        let ids: std::collections::BTreeSet<String> = replies
            .iter()
            .map(|r| {
                assert_eq!(r["code"], 0, "{engine}: {r}");
                r["data"]["id"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            ids.len(),
            1,
            "{engine}: one session for one key, got {ids:?}"
        );
        let id = ids.into_iter().next().unwrap();
        assert_eq!(
            replies
                .iter()
                .filter(|r| r["data"]["created"] == true)
                .count(),
            1,
            "{engine}: created once"
        );
        assert_eq!(
            containers_labelled("wharf.session", &id).len(),
            1,
            "{engine}: one container"
        );
        // A session created through one node is used through the other.
        let r = post(&format!("{}/v1/call", b.url), json!({"tool": "docker:run_command", "args": {"command": "echo via-b"}, "session_id": id})).await;
        assert_eq!(r["data"]["result"]["stdout"], "via-b\n", "{engine}: {r}");
        let del = reqwest::Client::new()
            .delete(format!("{}/v1/sessions/{id}", a.url))
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), 200);
        assert!(
            containers_labelled("wharf.session", &id).is_empty(),
            "{engine}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_live_sessions_are_adopted_stale_ones_removed_and_orphans_reaped() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let config = write_config(dir.path(), &format!("n-{engine}"), &store);
        let first = WharfProcess::start(&config);
        let s1 = post(
            &format!("{}/v1/sessions", first.url),
            json!({"backend": "docker", "key": "keep"}),
        )
        .await;
        let s1 = s1["data"]["id"].as_str().unwrap().to_string();
        let w = post(&format!("{}/v1/call", first.url), json!({"tool": "docker:write_file", "args": {"path": "/work/note.txt", "content": "survives"}, "session_id": s1})).await;
        assert_eq!(w["code"], 0, "{w}");
        let s2 = post(
            &format!("{}/v1/sessions", first.url),
            json!({"backend": "docker", "key": "stale"}),
        )
        .await;
        let s2 = s2["data"]["id"].as_str().unwrap().to_string();
        let pad = post(
            &format!("{}/v1/sessions", first.url),
            json!({"backend": "scratchpad", "key": "pad"}),
        )
        .await;
        let pad = pad["data"]["id"].as_str().unwrap().to_string();
        post(
            &format!("{}/v1/call", first.url),
            json!({"tool": "scratchpad:write", "args": {"note": "kept"}, "session_id": pad}),
        )
        .await;
        first.kill9();

        // While the host is dead: one sandbox disappears, and an orphan appears.
        for c in containers_labelled("wharf.session", &s2) {
            std::process::Command::new("docker")
                .args(["rm", "-f", &c])
                .output()
                .unwrap();
        }
        let node = std::fs::read_to_string(dir.path().join(format!("n-{engine}")).join("node-id"))
            .unwrap();
        let orphan_session = format!("ses_orphan{}", &engine[..2]);
        let out = std::process::Command::new("docker")
            .args([
                "run",
                "-d",
                "--network",
                "none",
                "--label",
                "wharf.backend=docker",
                "--label",
            ])
            .arg(format!("wharf.session={orphan_session}"))
            .arg("--label")
            .arg(format!("wharf.node={}", node.trim()))
            .args(["wharf-sandbox:test", "sleep", "600"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let second = WharfProcess::start(&config);
        let back = get(&format!("{}/v1/sessions/{s1}", second.url)).await;
        assert_eq!(
            back["code"], 0,
            "{engine}: the live session is adopted: {back}"
        );
        let read = post(&format!("{}/v1/call", second.url), json!({"tool": "docker:read_file", "args": {"path": "/work/note.txt"}, "session_id": s1})).await;
        assert_eq!(
            read["data"]["result"]["content"], "survives",
            "{engine}: {read}"
        );
        let again = post(
            &format!("{}/v1/sessions", second.url),
            json!({"backend": "docker", "key": "keep"}),
        )
        .await;
        assert_eq!(
            again["data"]["id"],
            s1.as_str(),
            "{engine}: same key, same sandbox after restart"
        );
        assert_eq!(
            get(&format!("{}/v1/sessions/{s2}", second.url)).await["code"],
            4007,
            "{engine}: stale record removed"
        );
        let notes = post(
            &format!("{}/v1/call", second.url),
            json!({"tool": "scratchpad:read", "session_id": pad}),
        )
        .await;
        assert_eq!(
            notes["data"]["result"]["notes"],
            json!(["kept"]),
            "{engine}: {notes}"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !containers_labelled("wharf.session", &orphan_session).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{engine}: the orphan was not reaped"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        reqwest::Client::new()
            .delete(format!("{}/v1/sessions/{s1}", second.url))
            .send()
            .await
            .unwrap();
        assert!(containers_labelled("wharf.session", &s1).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_whose_session_is_still_creating_is_never_reaped() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let h = start_with(vec![("docker", docker_provider())], |s| {
            s.store_url = Some(store.clone())
        })
        .await;
        let now = wharf::sessions::now_ms();
        let creating = wharf::sessions::SessionRecord {
            id: format!("ses_creating_{engine}"),
            tenant: "anonymous".into(),
            backend: "docker".into(),
            key: "in-flight".into(),
            state: wharf::store::SessionState::Creating,
            data: Value::Null,
            owner: None,
            holder: None,
            holder_until_ms: 0,
            plugin_version: "0.1.0".into(),
            node: "some-other-node".into(),
            lease_until_ms: now + 60_000,
            created_at_ms: now,
            last_activity_ms: now,
            idle_ttl_seconds: 0,
            max_expires_at_ms: None,
            generation: 0,
            paused_until_ms: None,
            archive: None,
        };
        let store_handle = wharf::store::StateStore::open(&store).await.unwrap();
        assert!(store_handle.insert_creating(&creating).await.unwrap());
        let out = std::process::Command::new("docker")
            .args([
                "run",
                "-d",
                "--network",
                "none",
                "--label",
                "wharf.backend=docker",
                "--label",
            ])
            .arg(format!("wharf.session={}", creating.id))
            .args([
                "--label",
                "wharf.node=some-other-node",
                "wharf-sandbox:test",
                "sleep",
                "600",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let container = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let reaped = h.wharf.reap_orphans().await.unwrap();
        assert!(
            !reaped.contains(&container),
            "{engine}: a creating session's container was reaped"
        );
        assert_eq!(containers_labelled("wharf.session", &creating.id).len(), 1);
        // Once the record is gone and its node's lease has run out, it is an orphan.
        store_handle
            .heartbeat("some-other-node", now as i64 - 1_000, now as i64 - 60_000)
            .await
            .unwrap();
        let reaped = h.wharf.reap_orphans().await.unwrap();
        assert!(
            !reaped.contains(&container),
            "{engine}: the record still exists"
        );
        store_handle.delete_session(&creating.id).await.unwrap();
        let reaped = h.wharf.reap_orphans().await.unwrap();
        assert!(reaped.contains(&container), "{engine}: now it is an orphan");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_ttl_releases_the_session_after_its_time_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let mut backends = vec![("scratchpad", bundled("scratchpad"))];
        let docker = docker_ready();
        if docker {
            backends.push(("docker", docker_provider()));
        }
        let h = start_with(backends, |s| s.store_url = Some(store.clone())).await;
        let started = Instant::now();
        let s = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "ttl", "ttl_seconds": 2}),
            )
            .await;
        let id = s.body["data"]["id"].as_str().unwrap().to_string();
        let sandbox = if docker {
            let d = h
                .post(
                    "/v1/sessions",
                    json!({"backend": "docker", "key": "ttl", "ttl_seconds": 2}),
                )
                .await;
            Some(d.body["data"]["id"].as_str().unwrap().to_string())
        } else {
            None
        };
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(
            h.get(&format!("/v1/sessions/{id}")).await.code(),
            0,
            "{engine}: not gone before 2 s"
        );
        let no_ttl = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "forever", "ttl_seconds": 0}),
            )
            .await;
        let forever = no_ttl.body["data"]["id"].as_str().unwrap().to_string();
        loop {
            if h.get(&format!("/v1/sessions/{id}")).await.code() == 4007 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{engine}: not released in time"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "{engine}: released too early"
        );
        if let Some(sandbox) = sandbox {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !containers_labelled("wharf.session", &sandbox).is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "{engine}: the expired sandbox's container is still there"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        assert_eq!(
            h.get(&format!("/v1/sessions/{forever}")).await.code(),
            0,
            "{engine}: ttl 0 never expires"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_and_holder_claims() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let h = start_with(vec![("scratchpad", bundled("scratchpad"))], |s| {
            s.store_url = Some(store.clone())
        })
        .await;
        let first = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "alice", "holder": "w1"}),
            )
            .await;
        assert_eq!(first.code(), 0, "{engine}: {}", first.body);
        let id = first.body["data"]["id"].as_str().unwrap().to_string();
        let other_owner = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "bob"}),
            )
            .await;
        assert_eq!(
            (other_owner.status, other_owner.code()),
            (409, 4090),
            "{engine}: {}",
            other_owner.body
        );
        let second_holder = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "alice", "holder": "w2"}),
            )
            .await;
        assert_eq!(
            second_holder.code(),
            4090,
            "{engine}: held by w1: {}",
            second_holder.body
        );
        let same_holder = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "alice", "holder": "w1"}),
            )
            .await;
        assert_eq!(same_holder.code(), 0, "{engine}: w1 re-attaches");
        // Releasing someone else's claim does nothing; releasing your own frees the session.
        let not_mine = h
            .delete(&format!("/v1/sessions/{id}/claim?holder=w2"))
            .await;
        assert_eq!(
            not_mine.body["data"]["released"], false,
            "{engine}: {}",
            not_mine.body
        );
        assert_eq!(
            h.post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "alice", "holder": "w2"})
            )
            .await
            .code(),
            4090
        );
        assert_eq!(
            h.delete(&format!("/v1/sessions/{id}/claim?holder=w1"))
                .await
                .body["data"]["released"],
            true
        );
        let now_w2 = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "owner": "alice", "holder": "w2"}),
            )
            .await;
        assert_eq!(now_w2.code(), 0, "{engine}: {}", now_w2.body);
        assert_eq!(now_w2.body["data"]["id"], id.as_str());
    }
}

/// A TCP forwarder in front of PostgreSQL that the test can cut and restore.
struct CuttableProxy {
    addr: std::net::SocketAddr,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    links: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl CuttableProxy {
    async fn start(target: String) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let links = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (o, l) = (open.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !o.load(Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                l.lock().unwrap().push(task.abort_handle());
            }
        });
        Self { addr, open, links }
    }

    fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_answers_5012_and_loses_nothing() {
    let Some(pg) = wharf_integration_tests::processes::fresh_postgres() else {
        return;
    };
    // postgres://user:pw@HOST:PORT/db → through the proxy.
    let (prefix, rest) = pg.split_once('@').unwrap();
    let (hostport, db) = rest.split_once('/').unwrap();
    let proxy = CuttableProxy::start(hostport.to_string()).await;
    let url = format!("{prefix}@{}/{db}", proxy.addr);
    let h = start_with(
        vec![
            ("scratchpad", bundled("scratchpad")),
            ("echo", bundled("echo")),
        ],
        |s| s.store_url = Some(url.clone()),
    )
    .await;
    let s = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "outage"}),
        )
        .await;
    let id = s.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        h.call_in(&id, "scratchpad:write", json!({"note": "before"}))
            .await
            .code(),
        0
    );

    proxy.cut();
    let started = Instant::now();
    let r = h
        .call_in(&id, "scratchpad:write", json!({"note": "during"}))
        .await;
    assert_eq!((r.status, r.code()), (503, 5012), "{}", r.body);
    assert_eq!(r.body["retryable"], true);
    assert_eq!(
        h.post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "new"})
        )
        .await
        .code(),
        5012
    );
    assert_eq!(h.get(&format!("/v1/sessions/{id}")).await.code(), 5012);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "answers come within the pool's timeout"
    );
    assert_eq!(
        h.call("echo:ping", json!({})).await.code(),
        0,
        "stateless tools keep working"
    );

    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = h.call_in(&id, "scratchpad:read", json!({})).await;
        if r.code() == 0 {
            assert_eq!(
                r.body["data"]["result"]["notes"],
                json!(["before"]),
                "nothing lost, nothing half-written"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not come back: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        h.call_in(&id, "scratchpad:write", json!({"note": "after"}))
            .await
            .code(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_cleanly_and_keeps_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}?mode=rwc", dir.path().join("term.db").display());
    let config = write_config(dir.path(), "term", &store);
    let first = WharfProcess::start(&config);
    let s = post(
        &format!("{}/v1/sessions", first.url),
        json!({"backend": "scratchpad", "key": "durable"}),
    )
    .await;
    let id = s["data"]["id"].as_str().unwrap().to_string();
    post(
        &format!("{}/v1/call", first.url),
        json!({"tool": "scratchpad:write", "args": {"note": "n"}, "session_id": id}),
    )
    .await;
    assert!(
        first.terminate(Duration::from_secs(20)),
        "SIGTERM: a clean exit in time"
    );
    let second = WharfProcess::start(&config);
    let again = post(
        &format!("{}/v1/sessions", second.url),
        json!({"backend": "scratchpad", "key": "durable"}),
    )
    .await;
    assert_eq!(
        again["data"]["id"],
        id.as_str(),
        "the session outlived the process"
    );
    assert_eq!(again["data"]["data"]["notes"], json!(["n"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_state_outlives_instances_and_hosts_and_has_quotas() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let first = start_with(vec![("probe", bundled("probe"))], |s| {
            s.store_url = Some(store.clone())
        })
        .await;
        let set = first
            .call(
                "probe:kv",
                json!({"scope": "backend", "key": "greeting", "value": "hello"}),
            )
            .await;
        assert_eq!(
            set.body["data"]["result"]["value"], "hello",
            "{engine}: {}",
            set.body
        );
        let second = start_with(vec![("probe", bundled("probe"))], |s| {
            s.store_url = Some(store.clone())
        })
        .await;
        let got = second
            .call("probe:kv", json!({"scope": "backend", "key": "greeting"}))
            .await;
        assert_eq!(
            got.body["data"]["result"]["value"], "hello",
            "{engine}: another host sees it"
        );
        assert_eq!(got.body["data"]["result"]["keys"], json!(["greeting"]));

        let no_session = second
            .call("probe:kv", json!({"scope": "session", "key": "k"}))
            .await;
        assert_eq!(no_session.code(), 4007, "{engine}: {}", no_session.body);
        let a = second
            .post("/v1/sessions", json!({"backend": "probe", "key": "a"}))
            .await
            .body["data"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let b = second
            .post("/v1/sessions", json!({"backend": "probe", "key": "b"}))
            .await
            .body["data"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        second
            .call_in(
                &a,
                "probe:kv",
                json!({"scope": "session", "key": "mine", "value": "a-data"}),
            )
            .await;
        let from_b = second
            .call_in(&b, "probe:kv", json!({"scope": "session", "key": "mine"}))
            .await;
        assert!(
            from_b.body["data"]["result"]["value"].is_null(),
            "{engine}: sessions do not see each other's state"
        );
        let from_a = first
            .call_in(&a, "probe:kv", json!({"scope": "session", "key": "mine"}))
            .await;
        assert_eq!(
            from_a.body["data"]["result"]["value"], "a-data",
            "{engine}: {}",
            from_a.body
        );
        second.delete(&format!("/v1/sessions/{a}")).await;
        let again = second
            .post("/v1/sessions", json!({"backend": "probe", "key": "a"}))
            .await
            .body["data"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let dropped = second
            .call_in(
                &again,
                "probe:kv",
                json!({"scope": "session", "key": "mine"}),
            )
            .await;
        assert!(
            dropped.body["data"]["result"]["value"].is_null(),
            "{engine}: released with its session"
        );

        let too_big = second
            .call(
                "probe:kv",
                json!({"scope": "backend", "key": "big", "value": "x", "repeat": 70_000}),
            )
            .await;
        assert_eq!(too_big.code(), 4000, "{engine}: {}", too_big.body);
        assert!(
            too_big.body["message"]
                .as_str()
                .unwrap()
                .contains("at most"),
            "{}",
            too_big.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_quota_usage_counts_bytes_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, url) in store_urls(dir.path()) {
        let store = wharf::store::StateStore::open(&url).await.unwrap();
        let scope = wharf::store::KvScope::Backend;
        // "é" is one character and two bytes; "日本" two characters and six bytes.
        store.kv_set("quota", &scope, "é", b"abc").await.unwrap();
        store
            .kv_set("quota", &scope, "日本", &[0u8; 10])
            .await
            .unwrap();
        let (keys, bytes) = store.kv_usage_except("quota", &scope, "x").await.unwrap();
        assert_eq!((keys, bytes), (2, 2 + 3 + 6 + 10), "{engine}");
        let (keys, bytes) = store.kv_usage_except("quota", &scope, "é").await.unwrap();
        assert_eq!((keys, bytes), (1, 16), "{engine}");
    }
}

//! Crashes and nodes starting together, driven from outside against real `wharf serve`
//! processes, real Docker and both store engines: a node killed with SIGKILL while
//! sessions are being created or released leaves no container and no half-done row once
//! the sweeper has run (on the restarted node, or on another node after the lease ran
//! out), and several nodes started at once on a fresh database all come up.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wharf::sessions::SessionRecord;
use wharf::store::{SessionState, StateStore};
use wharf_integration_tests::containers_labelled;
use wharf_integration_tests::docker_ready;
use wharf_integration_tests::processes::{WharfProcess, fresh_postgres, store_urls, wharf_bin};

/// The lease and sweep period every node of these tests runs with.
const LEASE_SECONDS: u64 = 2;
const SWEEP_SECONDS: u64 = 1;
/// How long the sweep may take to finish what a crash left: the lease, a few sweeps,
/// and slack for a loaded machine.
const SWEPT_WITHIN: Duration = Duration::from_secs(LEASE_SECONDS + 6 * SWEEP_SECONDS + 20);

fn write_config(dir: &Path, node: &str, store: &str) -> PathBuf {
    let data = dir.join(node);
    std::fs::create_dir_all(&data).unwrap();
    let path = dir.join(format!("{node}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"
lease_seconds = {LEASE_SECONDS}
sweep_interval_seconds = {SWEEP_SECONDS}

[store]
url = "{store}"

[backends.docker]
path = "bundled:docker-provider"
[backends.docker.grants]
images = ["wharf-sandbox:test"]
max_containers = 64
"#,
            data.display()
        ),
    )
    .unwrap();
    path
}

fn node_id(dir: &Path, node: &str) -> String {
    std::fs::read_to_string(dir.join(node).join("node-id"))
        .unwrap()
        .trim()
        .to_string()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn rows(store: &StateStore) -> Vec<SessionRecord> {
    store.list_sessions(None, None, None).await.unwrap()
}

fn unfinished(rows: &[SessionRecord]) -> Vec<&SessionRecord> {
    rows.iter()
        .filter(|r| r.state != SessionState::Ready)
        .collect()
}

/// Fires creates at `node` and kills it with SIGKILL as soon as one of them has a
/// container while its row is still `creating`; returns the ids then in `creating`.
async fn kill_during_creates(node: WharfProcess, store: &StateStore, tag: &str) -> Vec<String> {
    let requests: Vec<_> = (0..6)
        .map(|i| {
            let url = format!("{}/v1/sessions", node.url);
            let key = format!("{tag}-create-{i}");
            tokio::spawn(async move {
                let _ = client()
                    .post(url)
                    .json(&serde_json::json!({"backend": "docker", "key": key}))
                    .send()
                    .await;
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let in_flight = loop {
        let creating: Vec<String> = unfinished(&rows(store).await)
            .iter()
            .filter(|r| r.state == SessionState::Creating)
            .map(|r| r.id.clone())
            .collect();
        if creating
            .iter()
            .any(|id| !containers_labelled("wharf.session", id).is_empty())
        {
            break creating;
        }
        assert!(
            Instant::now() < deadline,
            "{tag}: never saw a container made while its session was still creating"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    node.kill9();
    for request in requests {
        request.abort();
    }
    in_flight
}

/// Creates three sessions on `node`, then fires their releases and kills it with SIGKILL
/// as soon as one row is `releasing`; returns the ids then in `releasing`.
async fn kill_during_releases(node: WharfProcess, store: &StateStore, tag: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..3 {
        let reply: serde_json::Value = client()
            .post(format!("{}/v1/sessions", node.url))
            .json(&serde_json::json!({"backend": "docker", "key": format!("{tag}-release-{i}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "{tag}: {reply}");
        ids.push(reply["data"]["id"].as_str().unwrap().to_string());
    }
    let requests: Vec<_> = ids
        .iter()
        .map(|id| {
            let url = format!("{}/v1/sessions/{id}", node.url);
            tokio::spawn(async move {
                let _ = client().delete(url).send().await;
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let in_flight = loop {
        let releasing: Vec<String> = unfinished(&rows(store).await)
            .iter()
            .filter(|r| r.state == SessionState::Releasing && ids.contains(&r.id))
            .map(|r| r.id.clone())
            .collect();
        if !releasing.is_empty() {
            break releasing;
        }
        assert!(
            Instant::now() < deadline,
            "{tag}: never saw a session releasing"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    node.kill9();
    for request in requests {
        request.abort();
    }
    in_flight
}

/// Waits until no row is `creating` or `releasing` and every container made by
/// `dead_node` belongs to a ready session; fails with what is left after the sweep time.
async fn assert_swept(store: &StateStore, dead_node: &str, killed: &[String], tag: &str) {
    assert!(
        !killed.is_empty(),
        "{tag}: the kill caught nothing in flight"
    );
    let deadline = Instant::now() + SWEPT_WITHIN;
    loop {
        let now = rows(store).await;
        let ready: BTreeSet<&str> = now
            .iter()
            .filter(|r| r.state == SessionState::Ready)
            .map(|r| r.id.as_str())
            .collect();
        let stuck: Vec<String> = unfinished(&now)
            .iter()
            .map(|r| format!("{} {:?}", r.id, r.state))
            .collect();
        let leaked: Vec<String> = containers_labelled("wharf.node", dead_node)
            .into_iter()
            .filter(|c| !container_session(c).is_some_and(|s| ready.contains(s.as_str())))
            .collect();
        // A create can finish between the last look and the signal landing: that session
        // is ready and keeps its container; every other one caught by the kill has none.
        let killed_alive: Vec<&String> = killed
            .iter()
            .filter(|id| !ready.contains(id.as_str()))
            .filter(|id| !containers_labelled("wharf.session", id).is_empty())
            .collect();
        if stuck.is_empty() && leaked.is_empty() && killed_alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{tag}: after {SWEPT_WITHIN:?} rows still unfinished: {stuck:?}; containers leaked: \
             {leaked:?}; sessions caught by the kill that still have containers: {killed_alive:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn container_session(id: &str) -> Option<String> {
    let out = Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{index .Config.Labels \"wharf.session\"}}",
            id,
        ])
        .output()
        .ok()?;
    let session = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !session.is_empty()).then_some(session)
}

/// Releases what is left through a live node and removes the containers of the test's
/// nodes (only those: other tests share the Docker engine).
async fn clean_up(live: &WharfProcess, store: &StateStore, nodes: &[String]) {
    for row in rows(store).await {
        let _ = client()
            .delete(format!("{}/v1/sessions/{}", live.url, row.id))
            .send()
            .await;
    }
    for node in nodes {
        for c in containers_labelled("wharf.node", node) {
            let _ = Command::new("docker").args(["rm", "-f", &c]).output();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_creates_and_releases_leaks_nothing_once_the_restarted_node_sweeps() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, url) in store_urls(dir.path()) {
        let name = format!("restart-{engine}");
        let config = write_config(dir.path(), &name, &url);
        let store = StateStore::open(&url).await.unwrap();

        let first = WharfProcess::start(&config);
        let node = node_id(dir.path(), &name);
        let killed = kill_during_creates(first, &store, &name).await;
        let second = WharfProcess::start(&config);
        assert_swept(&store, &node, &killed, &format!("{engine} create")).await;

        let killed = kill_during_releases(second, &store, &name).await;
        let third = WharfProcess::start(&config);
        assert_swept(&store, &node, &killed, &format!("{engine} release")).await;
        let health = client()
            .get(format!("{}/healthz", third.url))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200, "{engine}");
        clean_up(&third, &store, &[node]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_creates_and_releases_are_swept_by_another_node_once_its_lease_runs_out() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, url) in store_urls(dir.path()) {
        let store = StateStore::open(&url).await.unwrap();
        let survivor_name = format!("survivor-{engine}");
        let survivor = WharfProcess::start(&write_config(dir.path(), &survivor_name, &url));

        let creator_name = format!("creator-{engine}");
        let creator = WharfProcess::start(&write_config(dir.path(), &creator_name, &url));
        let creator_node = node_id(dir.path(), &creator_name);
        let killed = kill_during_creates(creator, &store, &creator_name).await;
        assert_swept(&store, &creator_node, &killed, &format!("{engine} create")).await;

        let releaser_name = format!("releaser-{engine}");
        let releaser = WharfProcess::start(&write_config(dir.path(), &releaser_name, &url));
        let releaser_node = node_id(dir.path(), &releaser_name);
        let killed = kill_during_releases(releaser, &store, &releaser_name).await;
        assert_swept(
            &store,
            &releaser_node,
            &killed,
            &format!("{engine} release"),
        )
        .await;

        let health = client()
            .get(format!("{}/healthz", survivor.url))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200, "{engine}");
        let survivor_node = node_id(dir.path(), &survivor_name);
        clean_up(
            &survivor,
            &store,
            &[creator_node, releaser_node, survivor_node],
        )
        .await;
    }
}

/// `wharf serve` processes started together; killed when dropped.
struct Started(Vec<(Child, u16, PathBuf)>);

impl Drop for Started {
    fn drop(&mut self) {
        for (child, _, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts one process per config at the same moment, then checks every one answers
/// `/healthz`; a process that exits first fails the test with its log.
async fn start_together_and_check_health(configs: &[PathBuf], tag: &str) {
    let mut started = Started(Vec::new());
    for config in configs {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = config.with_extension("log");
        let child = Command::new(wharf_bin())
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--config",
            ])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        started.0.push((child, port, log));
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    for (child, port, log) in &mut started.0 {
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{tag}: a node exited ({status}) while starting: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            let health = client()
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .send()
                .await;
            if health.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(Instant::now() < deadline, "{tag}: a node did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A database made for one test, dropped when the test ends (passed or not).
struct FreshDatabase(String);

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let (Ok(admin), Some((_, name))) = (
            std::env::var("WHARF_TEST_POSTGRES_URL"),
            self.0.rsplit_once('/'),
        ) else {
            return;
        };
        let _ = Command::new("psql")
            .arg(&admin)
            .args([
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            ])
            .output();
    }
}

/// A node with no backends, so the start is the store's opening and little else.
fn bare_config(dir: &Path, node: &str, store: &str) -> PathBuf {
    let data = dir.join(node);
    std::fs::create_dir_all(&data).unwrap();
    let path = dir.join(format!("{node}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[store]\nurl = \"{store}\"\n",
            data.display()
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_started_at_once_on_a_fresh_database_all_come_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut stores = vec![(
        "sqlite",
        format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("fresh.db").display()
        ),
        None,
    )];
    if let Some(pg) = fresh_postgres() {
        stores.push(("postgres", pg.clone(), Some(FreshDatabase(pg))));
    }
    for (engine, url, _dropped_at_the_end) in stores {
        let configs: Vec<PathBuf> = (0..3)
            .map(|i| bare_config(dir.path(), &format!("together-{engine}-{i}"), &url))
            .collect();
        start_together_and_check_health(&configs, engine).await;
    }
}

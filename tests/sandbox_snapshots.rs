//! Snapshots (issue 37, docs/agents.md "Snapshots"), through a real `wharf serve`, real
//! Docker and docker-provider sandboxes: a snapshot keeps the work dir (a volume, which a
//! plain commit would lose) and the rest of the filesystem; a session started from it has
//! those files and is independent of its origin; another tenant can neither list, read,
//! use nor delete it (4007); a snapshot a sandbox runs from is not deleted (4090); its image
//! cannot be named in a session's config to get around `grants.images`; a host killed while
//! a snapshot is being made leaves no row and no image behind once it is back, and one
//! killed during a fork leaves only sessions the API reports truthfully.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wharf_integration_tests::processes::{WharfProcess, store_urls};
use wharf_integration_tests::tenant_client::TenantClient;
use wharf_integration_tests::{
    containers_labelled, docker_ready, eventually, images_labelled, remove_backend_containers,
    remove_backend_snapshots,
};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

fn write_config(dir: &Path, backend: &str) -> PathBuf {
    write_config_with(dir, backend, "", "")
}

/// The config with `server_tables` (tables under `[server]`) and `grants` (more lines of
/// the backend's grants).
fn write_config_with(dir: &Path, backend: &str, server_tables: &str, grants: &str) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"
sweep_interval_seconds = 1
{server_tables}

[[auth.tokens]]
name = "alice"
value = "{ALICE}"
scopes = ["read", "call"]

[[auth.tokens]]
name = "bob"
value = "{BOB}"
scopes = ["read", "call"]

[backends.{backend}]
path = "bundled:docker-provider"
[backends.{backend}.grants]
images = ["wharf-sandbox:test"]
{grants}
"#,
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_keeps_the_sandboxs_files_for_its_tenant_only() {
    if !docker_ready() {
        return;
    }
    let backend = "snapdocker";
    remove_backend_containers(backend);
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&write_config(dir.path(), backend));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let bob = TenantClient {
        url: &host.url,
        token: BOB,
    };
    let made = alice
        .post("/v1/sessions", json!({"backend": backend, "key": "origin"}))
        .await;
    let origin = made["data"]["id"].as_str().expect("a session").to_string();
    alice
        .run(
            backend,
            &origin,
            "echo kept > note && dd if=/dev/urandom of=big bs=1M count=50 2>/dev/null && mkdir -p /opt/x && echo root > /opt/x/f",
        )
        .await;

    let started = Instant::now();
    let snapshot = alice
        .post(
            &format!("/v1/sessions/{origin}/snapshots"),
            json!({"name": "base"}),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(snapshot["code"], 0, "{snapshot}");
    eprintln!("a snapshot with 50 MB changed took {took:?}");
    let snap = snapshot["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(snapshot["data"]["name"], "base");
    assert_eq!(snapshot["data"]["state"], "ready");
    assert!(
        snapshot["data"]["bytes"].as_u64().unwrap() >= 50 << 20,
        "{snapshot}"
    );
    let image = snapshot["data"]["image"].as_str().unwrap().to_string();
    assert_eq!(images_labelled("wharf.snapshot", &snap).len(), 1);
    // The origin keeps running and keeps its work dir as it was.
    let left = alice
        .run(
            backend,
            &origin,
            "cat note; ls /.wharf-snapshot-work 2>&1 | head -1",
        )
        .await;
    assert!(
        left["stdout"].as_str().unwrap().starts_with("kept\n"),
        "{left}"
    );
    assert!(
        left["stdout"].as_str().unwrap().contains("No such file"),
        "the copy is cleared: {left}"
    );

    // Another tenant sees nothing of it.
    let listed = bob.get("/v1/snapshots").await;
    assert_eq!(listed["data"]["snapshots"], json!([]), "{listed}");
    for reply in [
        bob.get(&format!("/v1/snapshots/{snap}")).await,
        bob.delete(&format!("/v1/snapshots/{snap}")).await,
        bob.post(
            "/v1/sessions",
            json!({"backend": backend, "key": "stolen", "from_snapshot": snap}),
        )
        .await,
    ] {
        assert_eq!(reply["code"], 4007, "{reply}");
    }
    // Its image is not granted by name.
    let by_name = bob
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": "by-name", "config": {"image": image}}),
        )
        .await;
    assert_ne!(by_name["code"], 0, "{by_name}");
    assert!(by_name.to_string().contains("grants.images"), "{by_name}");

    // A session from it has its files, and is its own.
    let listed = alice.get("/v1/snapshots").await;
    assert_eq!(listed["data"]["snapshots"][0]["id"], snap, "{listed}");
    let copy = alice
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": "copy", "from_snapshot": snap}),
        )
        .await;
    assert_eq!(copy["code"], 0, "{copy}");
    let copy = copy["data"]["id"].as_str().unwrap().to_string();
    let seen = alice
        .run(backend, &copy, "cat note /opt/x/f; wc -c < big; pwd")
        .await;
    assert_eq!(seen["stdout"], "kept\nroot\n52428800\n/work\n", "{seen}");
    alice.run(backend, &copy, "echo changed > note").await;
    let still = alice.run(backend, &origin, "cat note").await;
    assert_eq!(
        still["stdout"], "kept\n",
        "the origin does not see the copy's change"
    );

    // The scrape counts the tenant's snapshots and their bytes.
    let metrics = alice.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wharf_tenant_snapshots{")
                && l.contains("alice")
                && l.ends_with(" 1")),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wharf_tenant_snapshot_bytes{") && l.contains("alice")),
        "{metrics}"
    );

    // The command line: pause, resume (a paused session is resumed before its snapshot)
    // and snapshot.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(wharf_integration_tests::processes::wharf_bin())
            .arg("sessions")
            .args(args)
            .args(["--url", &host.url])
            .env("WHARF_TOKEN", ALICE)
            .output()
            .expect("wharf runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    cli(&["pause", &copy]);
    assert_eq!(
        alice.get(&format!("/v1/sessions/{copy}")).await["data"]["state"],
        "paused"
    );
    let by_cli = cli(&["snapshot", &copy, "--name", "from-cli"]);
    assert!(by_cli.starts_with("snap_"), "{by_cli}");
    let shown = alice.get(&format!("/v1/snapshots/{by_cli}")).await;
    assert_eq!(shown["data"]["name"], "from-cli", "{shown}");
    assert_eq!(
        alice.get(&format!("/v1/sessions/{copy}")).await["data"]["state"],
        "ready"
    );
    assert_eq!(
        alice.delete(&format!("/v1/snapshots/{by_cli}")).await["code"],
        0
    );

    // The agent's own tool: a snapshot of the session its call runs in (the call holds
    // the session's turn, so the snapshot must not wait for it).
    let by_tool = alice
        .post(
            "/v1/call",
            json!({"tool": format!("{backend}:snapshot_sandbox"), "args": {"name": "by-tool"}, "session_id": copy}),
        )
        .await;
    assert_eq!(by_tool["code"], 0, "{by_tool}");
    let tool_snap = by_tool["data"]["result"]["snapshot"]
        .as_str()
        .expect("a snapshot id")
        .to_string();
    let shown = alice.get(&format!("/v1/snapshots/{tool_snap}")).await;
    assert_eq!(shown["data"]["name"], "by-tool", "{shown}");
    assert_eq!(shown["data"]["origin_session"], copy.as_str(), "{shown}");
    assert_eq!(
        alice.delete(&format!("/v1/snapshots/{tool_snap}")).await["code"],
        0
    );

    // In use: not deleted. Unused: deleted, image and all.
    let busy = alice.delete(&format!("/v1/snapshots/{snap}")).await;
    assert_eq!(busy["code"], 4090, "{busy}");
    assert_eq!(
        alice.delete(&format!("/v1/sessions/{copy}")).await["code"],
        0
    );
    let gone = alice.delete(&format!("/v1/snapshots/{snap}")).await;
    assert_eq!(gone["code"], 0, "{gone}");
    assert!(images_labelled("wharf.snapshot", &snap).is_empty());
    assert_eq!(
        alice.get(&format!("/v1/snapshots/{snap}")).await["code"],
        4007
    );
    drop(host);
    remove_backend_containers(backend);
}

/// Whether every session, container and snapshot image of `backend` is one the API
/// reports truthfully: each session ready with one container; every container a listed
/// session's; every snapshot ready, with its image and no other.
async fn accounted(alice: &TenantClient<'_>, backend: &str) -> Result<Vec<String>, String> {
    let listed = alice.get(&format!("/v1/sessions?backend={backend}")).await;
    let sessions = listed["data"]["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut ids = Vec::new();
    for s in &sessions {
        let id = s["id"].as_str().unwrap_or_default().to_string();
        let containers = containers_labelled("wharf.session", &id).len();
        if s["state"] != "ready" || containers != 1 {
            return Err(format!(
                "session {id}: {} with {containers} containers",
                s["state"]
            ));
        }
        ids.push(id);
    }
    for c in containers_labelled("wharf.backend", backend) {
        let out = std::process::Command::new("docker")
            .args([
                "inspect",
                "--format",
                "{{index .Config.Labels \"wharf.session\"}}",
                &c,
            ])
            .output()
            .expect("docker inspect runs");
        let session = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !ids.contains(&session) {
            return Err(format!("container {c} of no listed session ({session})"));
        }
    }
    let snapshots = alice.get("/v1/snapshots").await;
    let rows = snapshots["data"]["snapshots"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for row in &rows {
        let id = row["id"].as_str().unwrap_or_default();
        if row["state"] != "ready" || images_labelled("wharf.snapshot", id).len() != 1 {
            return Err(format!("snapshot row {row}"));
        }
    }
    let images = images_labelled("wharf.snapshot.backend", backend).len();
    if images != rows.len() {
        return Err(format!("{images} snapshot images, {} rows", rows.len()));
    }
    Ok(ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_during_a_fork_leaves_every_session_truthful() {
    if !docker_ready() {
        return;
    }
    let backend = "forkcrash";
    let dir = tempfile::tempdir().unwrap();
    // Killed as the fork's first sandbox appears (its others being made), and as its
    // first session is ready (the others being made or started).
    let runs = store_urls(dir.path())
        .into_iter()
        .flat_map(|(engine, store)| {
            [
                (engine, store.clone(), "sandbox"),
                (engine, store, "session"),
            ]
        });
    for (engine, store, kill_at) in runs {
        remove_backend_containers(backend);
        remove_backend_snapshots(backend);
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        let config = write_config_with(
            dir.path(),
            backend,
            &format!("\n[store]\nurl = \"{store}\""),
            "max_containers = 16",
        );
        let first = WharfProcess::start(&config);
        let alice = TenantClient {
            url: &first.url,
            token: ALICE,
        };
        let made = alice
            .post("/v1/sessions", json!({"backend": backend, "key": "origin"}))
            .await;
        let origin = made["data"]["id"].as_str().expect("a session").to_string();
        alice
            .run(
                backend,
                &origin,
                "echo kept > note && dd if=/dev/urandom of=big bs=1M count=20 2>/dev/null",
            )
            .await;
        let url = first.url.clone();
        let forking = origin.clone();
        let request = tokio::spawn(async move {
            let _ = reqwest::Client::new()
                .post(format!("{url}/v1/sessions/{forking}/fork"))
                .bearer_auth(ALICE)
                .json(&json!({"count": 6}))
                .send()
                .await;
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = match kill_at {
                "sandbox" => containers_labelled("wharf.backend", backend).len() > 1,
                _ => {
                    let listed = alice.get(&format!("/v1/sessions?backend={backend}")).await;
                    listed["data"]["sessions"]
                        .as_array()
                        .is_some_and(|l| l.iter().filter(|s| s["state"] == "ready").count() > 1)
                }
            };
            if seen {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{engine}: the fork made no {kill_at}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        first.kill9();
        request.abort();

        let second = WharfProcess::start(&config);
        let alice = TenantClient {
            url: &second.url,
            token: ALICE,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let sessions = loop {
            match accounted(&alice, backend).await {
                Ok(ids) => break ids,
                Err(why) => assert!(Instant::now() < deadline, "{engine}: {why}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(sessions.contains(&origin), "{engine}: the origin is kept");
        eprintln!(
            "{engine}, killed at its first {kill_at}: {} forked sessions were ready",
            sessions.len() - 1
        );
        for id in &sessions {
            let out = alice.run(backend, id, "cat note").await;
            assert_eq!(out["stdout"], "kept\n", "{engine}: {id} has the tree");
            alice.delete(&format!("/v1/sessions/{id}")).await;
        }
        for row in alice.get("/v1/snapshots").await["data"]["snapshots"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let id = row["id"].as_str().unwrap_or_default();
            assert_eq!(
                alice.delete(&format!("/v1/snapshots/{id}")).await["code"],
                0
            );
        }
        drop(second);
        remove_backend_containers(backend);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_while_a_snapshot_is_made_leaves_nothing_behind() {
    if !docker_ready() {
        return;
    }
    let backend = "snapcrash";
    remove_backend_containers(backend);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), backend);
    let first = WharfProcess::start(&config);
    let alice = TenantClient {
        url: &first.url,
        token: ALICE,
    };
    let made = alice
        .post("/v1/sessions", json!({"backend": backend, "key": "crash"}))
        .await;
    let origin = made["data"]["id"].as_str().unwrap().to_string();
    alice
        .run(
            backend,
            &origin,
            "dd if=/dev/urandom of=big bs=1M count=300 2>/dev/null",
        )
        .await;
    let url = first.url.clone();
    let origin_for_request = origin.clone();
    let request = tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .post(format!("{url}/v1/sessions/{origin_for_request}/snapshots"))
            .bearer_auth(ALICE)
            .json(&json!({}))
            .send()
            .await;
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = alice.get("/v1/snapshots").await;
        if listed["data"]["snapshots"]
            .as_array()
            .is_some_and(|l| l.iter().any(|s| s["state"] == "making"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot in the making: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill9();
    request.abort();

    let second = WharfProcess::start(&config);
    let alice = TenantClient {
        url: &second.url,
        token: ALICE,
    };
    eventually(30, "the abandoned snapshot row is swept", async || {
        alice.get("/v1/snapshots").await["data"]["snapshots"] == json!([])
    })
    .await;
    eventually(60, "no image of it is left", async || {
        images_labelled("wharf.snapshot.origin", &origin).is_empty()
    })
    .await;
    // The session itself is untouched.
    let out = alice.run(backend, &origin, "wc -c < big").await;
    assert_eq!(out["stdout"], "314572800\n", "{out}");
    drop(second);
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_ten_has_the_tree_in_each_and_a_failed_fork_leaves_nothing() {
    if !docker_ready() {
        return;
    }
    let backend = "snapfork";
    remove_backend_containers(backend);
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&write_config(dir.path(), backend));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let made = alice
        .post("/v1/sessions", json!({"backend": backend, "key": "tree"}))
        .await;
    let origin = made["data"]["id"].as_str().unwrap().to_string();
    alice
        .run(
            backend,
            &origin,
            "mkdir -p tree && for i in $(seq 1 50); do dd if=/dev/urandom of=tree/f$i bs=1M count=1 2>/dev/null; done; echo origin > mark",
        )
        .await;

    let started = Instant::now();
    let fork = alice
        .post(&format!("/v1/sessions/{origin}/fork"), json!({"count": 10}))
        .await;
    let took = started.elapsed();
    assert_eq!(fork["code"], 0, "{fork}");
    eprintln!("a fork of 10 with a 50 MB tree took {took:?}");
    let sessions: Vec<String> = fork["data"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sessions.len(), 10);
    let origin_sum = alice.run(backend, &origin, "cat tree/* | md5sum").await["stdout"].clone();
    for (i, id) in sessions.iter().enumerate() {
        let sum = alice.run(backend, id, "cat tree/* | md5sum").await;
        assert_eq!(sum["stdout"], origin_sum, "fork {i} has the tree");
        alice
            .run(backend, id, &format!("echo fork{i} > mark"))
            .await;
    }
    for (i, id) in sessions.iter().enumerate() {
        let mark = alice.run(backend, id, "cat mark").await;
        assert_eq!(mark["stdout"], format!("fork{i}\n"), "each fork is its own");
    }
    assert_eq!(
        alice.run(backend, &origin, "cat mark").await["stdout"],
        "origin\n"
    );

    // A fork whose sessions cannot be made (an isolation this backend is not granted)
    // removes what it made: no new session, no snapshot.
    let snapshots_before = alice.get("/v1/snapshots").await["data"]["snapshots"]
        .as_array()
        .unwrap()
        .len();
    let sessions_before = alice.get("/v1/sessions").await["data"]["sessions"]
        .as_array()
        .unwrap()
        .len();
    let failed = alice
        .post(
            &format!("/v1/sessions/{origin}/fork"),
            json!({"count": 3, "config": {"isolation": "gvisor"}}),
        )
        .await;
    assert_eq!(failed["code"], 4030, "{failed}");
    assert_eq!(
        alice.get("/v1/snapshots").await["data"]["snapshots"]
            .as_array()
            .unwrap()
            .len(),
        snapshots_before
    );
    assert_eq!(
        alice.get("/v1/sessions").await["data"]["sessions"]
            .as_array()
            .unwrap()
            .len(),
        sessions_before
    );
    let too_many = alice
        .post(&format!("/v1/sessions/{origin}/fork"), json!({"count": 33}))
        .await;
    assert_eq!(too_many["code"], 4004, "{too_many}");

    // Without a `config`, a fork gets its origin's: the same user and environment. The
    // kept config is never shown (an `env` may carry secrets).
    let configured = alice
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": "configured",
                   "config": {"user": "sandbox", "env": {"FORK_MARK": "kept-7f3a"}}}),
        )
        .await;
    assert_eq!(configured["code"], 0, "{configured}");
    let configured_id = configured["data"]["id"].as_str().unwrap().to_string();
    let shown = alice.get(&format!("/v1/sessions/{configured_id}")).await;
    assert!(!shown.to_string().contains("kept-7f3a"), "{shown}");
    let fork = alice
        .post(
            &format!("/v1/sessions/{configured_id}/fork"),
            json!({"count": 1}),
        )
        .await;
    assert_eq!(fork["code"], 0, "{fork}");
    let forked = fork["data"]["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let who = alice
        .run(backend, &forked, "echo \"$(id -u) $FORK_MARK\"")
        .await;
    assert_eq!(who["stdout"], "1000 kept-7f3a\n", "{who}");
    drop(host);
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_gvisor_a_snapshot_keeps_the_work_dir_and_the_root_but_not_tmp() {
    if !docker_ready() || !wharf_integration_tests::gvisor_ready() {
        return;
    }
    let backend = "snapgvisor";
    remove_backend_containers(backend);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config_with(
        dir.path(),
        backend,
        &format!(
            "[server.runtimes]\ngvisor = \"{}\"",
            wharf_integration_tests::GVISOR_RUNTIME
        ),
        "isolation = [\"gvisor\"]",
    );
    let host = WharfProcess::start(&config);
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let gvisor = json!({"isolation": "gvisor"});
    let made = alice
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": "origin", "config": gvisor}),
        )
        .await;
    assert_eq!(made["code"], 0, "{made}");
    let origin = made["data"]["id"].as_str().unwrap().to_string();
    // Under gVisor: its own kernel answers.
    let kernel = alice
        .run(backend, &origin, "dmesg 2>/dev/null | head -1")
        .await;
    assert!(
        kernel["stdout"].as_str().unwrap().contains("gVisor"),
        "{kernel}"
    );
    alice
        .run(
            backend,
            &origin,
            "echo work > note && mkdir -p /root/kept && echo root > /root/kept/f && echo gone > /tmp/t",
        )
        .await;
    let snapshot = alice
        .post(&format!("/v1/sessions/{origin}/snapshots"), json!({}))
        .await;
    assert_eq!(snapshot["code"], 0, "{snapshot}");
    let snap = snapshot["data"]["id"].as_str().unwrap().to_string();
    let copy = alice
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": "copy", "from_snapshot": snap, "config": gvisor}),
        )
        .await;
    assert_eq!(copy["code"], 0, "{copy}");
    let copy = copy["data"]["id"].as_str().unwrap().to_string();
    let seen = alice
        .run(
            backend,
            &copy,
            "cat note /root/kept/f; cat /tmp/t 2>/dev/null || echo no-tmp",
        )
        .await;
    assert_eq!(seen["stdout"], "work\nroot\nno-tmp\n", "{seen}");
    assert_eq!(
        alice.delete(&format!("/v1/sessions/{copy}")).await["code"],
        0
    );
    assert_eq!(
        alice.delete(&format!("/v1/snapshots/{snap}")).await["code"],
        0
    );
    drop(host);
    remove_backend_containers(backend);
}

//! Archives (issue 37, docs/agents.md "Archived sessions"), through a real `wharf serve`,
//! real Docker and docker-provider sandboxes: under `on_idle = "snapshot"` an idle session
//! is snapshotted and its sandbox destroyed; a call (or a resume) brings it back from the
//! snapshot with its files and says so; its archive belongs to its tenant and cannot be
//! deleted under it; deleting the session, or its archived TTL, removes the archive; and a
//! host killed with `kill -9` while sessions are being archived comes back with every
//! session in a state the API reports truthfully, every container and snapshot image
//! accounted for, and another tenant's snapshot untouched, on SQLite and PostgreSQL.

use serde_json::{Value, json};
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

/// Archived one second after its last call, kept an hour.
const ARCHIVING: &str = "idle_ttl_seconds = 1\non_idle = \"snapshot\"\narchived_ttl_seconds = 3600";

/// The config: `backend` a docker provider whose `[sessions]` table holds `sessions`.
fn write_config(dir: &Path, backend: &str, store: &str, sessions: &str) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"
sweep_interval_seconds = 1

[store]
url = "{store}"

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
[backends.{backend}.sessions]
{sessions}
"#,
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

async fn new_session(client: &TenantClient<'_>, backend: &str, key: &str) -> String {
    let made = client
        .post("/v1/sessions", json!({"backend": backend, "key": key}))
        .await;
    assert_eq!(made["code"], 0, "{made}");
    made["data"]["id"].as_str().expect("a session").to_string()
}

async fn call(client: &TenantClient<'_>, backend: &str, session: &str, command: &str) -> Value {
    client
        .post(
            "/v1/call",
            json!({"tool": format!("{backend}:run_command"), "args": {"command": command}, "session_id": session}),
        )
        .await
}

async fn state_of(client: &TenantClient<'_>, session: &str) -> Value {
    client.get(&format!("/v1/sessions/{session}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_archived_and_a_call_brings_back_its_files() {
    if !docker_ready() {
        return;
    }
    let backend = "archivedocker";
    remove_backend_containers(backend);
    remove_backend_snapshots(backend);
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("wharf.db").display()
    );
    let host = WharfProcess::start(&write_config(dir.path(), backend, &store, ARCHIVING));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let bob = TenantClient {
        url: &host.url,
        token: BOB,
    };
    let sid = new_session(&alice, backend, "archived").await;
    let reply = call(
        &alice,
        backend,
        &sid,
        "echo kept > note && mkdir -p /opt/x && echo root > /opt/x/f",
    )
    .await;
    assert_eq!(reply["code"], 0, "{reply}");

    eventually(30, "the idle session is archived", async || {
        state_of(&alice, &sid).await["data"]["state"] == "archived"
    })
    .await;
    let shown = state_of(&alice, &sid).await;
    let archive = shown["data"]["archive"]
        .as_str()
        .expect("an archive")
        .to_string();
    assert!(
        shown["data"]["paused_until_ms"].as_u64().is_some(),
        "{shown}"
    );
    eventually(10, "its sandbox is destroyed", async || {
        containers_labelled("wharf.session", &sid).is_empty()
    })
    .await;
    assert_eq!(images_labelled("wharf.snapshot", &archive).len(), 1);
    let listed = alice.get("/v1/snapshots").await;
    let snapshots = listed["data"]["snapshots"].as_array().unwrap().clone();
    assert_eq!(snapshots.len(), 1, "{listed}");
    assert_eq!(snapshots[0]["id"], archive.as_str());
    assert_eq!(snapshots[0]["archive_of"], sid.as_str());
    assert!(
        alice.metrics().await.contains(&format!(
            "wharf_sessions{{backend=\"{backend}\",state=\"archived\"}} 1"
        )),
        "the metrics count it"
    );

    // Its archive cannot be deleted under it; another tenant sees neither.
    let refused = alice.delete(&format!("/v1/snapshots/{archive}")).await;
    assert_eq!(refused["code"], 4090, "{refused}");
    assert_eq!(
        bob.get("/v1/snapshots").await["data"]["snapshots"],
        json!([])
    );
    for reply in [
        state_of(&bob, &sid).await,
        bob.post(&format!("/v1/sessions/{sid}/resume"), json!({}))
            .await,
        call(&bob, backend, &sid, "true").await,
        bob.delete(&format!("/v1/snapshots/{archive}")).await,
    ] {
        assert_eq!(reply["code"], 4007, "{reply}");
    }
    assert_eq!(state_of(&alice, &sid).await["data"]["state"], "archived");

    // A call brings it back, with its files, and says so.
    let started = Instant::now();
    let back = call(&alice, backend, &sid, "cat note /opt/x/f").await;
    eprintln!(
        "the first call of an archived session took {:?}",
        started.elapsed()
    );
    assert_eq!(back["code"], 0, "{back}");
    assert_eq!(back["data"]["result"]["stdout"], "kept\nroot\n", "{back}");
    assert_eq!(back["meta"]["resumed"], true, "{back}");
    assert_eq!(containers_labelled("wharf.session", &sid).len(), 1);
    let ready = state_of(&alice, &sid).await;
    assert_eq!(ready["data"]["state"], "ready", "{ready}");
    assert_eq!(
        ready["data"]["archive"],
        archive.as_str(),
        "its sandbox runs from it"
    );
    let refused = alice.delete(&format!("/v1/snapshots/{archive}")).await;
    assert_eq!(refused["code"], 4090, "{refused}");

    // Archived again (its earlier archive goes), then a resume brings it back.
    call(&alice, backend, &sid, "echo again >> note").await;
    eventually(30, "archived again", async || {
        let shown = state_of(&alice, &sid).await;
        shown["data"]["state"] == "archived" && shown["data"]["archive"] != archive.as_str()
    })
    .await;
    let second = state_of(&alice, &sid).await["data"]["archive"]
        .as_str()
        .unwrap()
        .to_string();
    eventually(10, "the earlier archive is removed", async || {
        images_labelled("wharf.snapshot", &archive).is_empty()
    })
    .await;
    let resumed = alice
        .post(&format!("/v1/sessions/{sid}/resume"), json!({}))
        .await;
    assert_eq!(resumed["code"], 0, "{resumed}");
    assert_eq!(resumed["data"]["resumed"], true, "{resumed}");
    assert_eq!(resumed["data"]["state"], "ready", "{resumed}");
    let kept = call(&alice, backend, &sid, "cat note").await;
    assert_eq!(kept["data"]["result"]["stdout"], "kept\nagain\n", "{kept}");
    assert!(kept["meta"]["resumed"].is_null(), "already running: {kept}");

    // Deleting the session removes its archive.
    let deleted = alice.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(deleted["code"], 0, "{deleted}");
    assert!(images_labelled("wharf.snapshot", &second).is_empty());
    assert_eq!(
        alice.get("/v1/snapshots").await["data"]["snapshots"],
        json!([])
    );
    drop(host);

    // Paused when idle, archived at its paused TTL (`on_paused_ttl`), and ended at its
    // archived TTL, its archive with it.
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("wharf.db").display()
    );
    let sessions = "idle_ttl_seconds = 1\non_idle = \"pause\"\npaused_ttl_seconds = 2\non_paused_ttl = \"snapshot\"\narchived_ttl_seconds = 3";
    let host = WharfProcess::start(&write_config(dir.path(), backend, &store, sessions));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let sid = new_session(&alice, backend, "short").await;
    alice.run(backend, &sid, "echo kept > note").await;
    eventually(30, "paused", async || {
        state_of(&alice, &sid).await["data"]["state"] == "paused"
    })
    .await;
    eventually(30, "archived at its paused TTL", async || {
        state_of(&alice, &sid).await["data"]["state"] == "archived"
    })
    .await;
    eventually(10, "its sandbox is destroyed", async || {
        containers_labelled("wharf.session", &sid).is_empty()
    })
    .await;
    eventually(30, "ended at its archived TTL", async || {
        state_of(&alice, &sid).await["code"] == 4007
    })
    .await;
    eventually(30, "its archive is swept", async || {
        images_labelled("wharf.snapshot.origin", &sid).is_empty()
            && alice.get("/v1/snapshots").await["data"]["snapshots"] == json!([])
    })
    .await;
    drop(host);

    // Past the backend's archived cap an idle session is released, and no archive is kept.
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("wharf.db").display()
    );
    let sessions = "idle_ttl_seconds = 1\non_idle = \"snapshot\"\nmax_archived = 0";
    let host = WharfProcess::start(&write_config(dir.path(), backend, &store, sessions));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };
    let sid = new_session(&alice, backend, "capped").await;
    eventually(30, "released past the cap", async || {
        state_of(&alice, &sid).await["code"] == 4007
    })
    .await;
    assert_eq!(
        alice.get("/v1/snapshots").await["data"]["snapshots"],
        json!([])
    );
    assert!(images_labelled("wharf.snapshot.origin", &sid).is_empty());
    eventually(10, "its sandbox is removed", async || {
        containers_labelled("wharf.session", &sid).is_empty()
    })
    .await;
    drop(host);
    remove_backend_containers(backend);
}

/// What the API and the engine say of `sessions` after a restart: each is ready with one
/// container, or archived with none and its archive's image; every snapshot image of the
/// backend has a ready row.
async fn truthful(alice: &TenantClient<'_>, backend: &str, sessions: &[String]) -> bool {
    for sid in sessions {
        let shown = state_of(alice, sid).await;
        let containers = containers_labelled("wharf.session", sid).len();
        match shown["data"]["state"].as_str() {
            Some("ready") if containers == 1 => {}
            Some("archived") if containers == 0 => {
                let Some(archive) = shown["data"]["archive"].as_str() else {
                    return false;
                };
                if images_labelled("wharf.snapshot", archive).len() != 1 {
                    return false;
                }
            }
            _ => return false,
        }
    }
    let listed = alice.get("/v1/snapshots").await;
    let rows: Vec<&Value> = listed["data"]["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    if rows.iter().any(|s| s["state"] != "ready") {
        return false;
    }
    let images = images_labelled("wharf.snapshot.backend", backend).len();
    let owned: usize = rows
        .iter()
        .map(|s| images_labelled("wharf.snapshot", s["id"].as_str().unwrap()).len())
        .sum();
    images == owned + 1 // and bob's
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_while_archiving_comes_back_truthful() {
    if !docker_ready() {
        return;
    }
    let backend = "archivecrash";
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        // Two kill points: as the first archive's commit starts, and as the first session
        // says it is archived (the others mid-commit or mid-destroy).
        for kill_when in ["snapshot", "archived"] {
            remove_backend_containers(backend);
            remove_backend_snapshots(backend);
            let _ = std::fs::remove_dir_all(dir.path().join("data"));
            let config = write_config(dir.path(), backend, &store, ARCHIVING);
            let first = WharfProcess::start(&config);
            let alice = TenantClient {
                url: &first.url,
                token: ALICE,
            };
            let bob = TenantClient {
                url: &first.url,
                token: BOB,
            };
            let theirs = new_session(&bob, backend, "bob").await;
            let snap = bob
                .post(&format!("/v1/sessions/{theirs}/snapshots"), json!({}))
                .await;
            assert_eq!(snap["code"], 0, "{snap}");
            let bobs = snap["data"]["id"].as_str().unwrap().to_string();
            bob.delete(&format!("/v1/sessions/{theirs}")).await;
            let mut sessions = Vec::new();
            for i in 0..3 {
                let sid = new_session(&alice, backend, &format!("{kill_when}-{i}")).await;
                let wrote = call(
                    &alice,
                    backend,
                    &sid,
                    "echo kept > note && dd if=/dev/urandom of=big bs=1M count=20 2>/dev/null",
                )
                .await;
                assert_eq!(wrote["code"], 0, "{wrote}");
                sessions.push(sid);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                assert!(Instant::now() < deadline, "{engine}: no archive began");
                let seen = match kill_when {
                    "snapshot" => !alice.get("/v1/snapshots").await["data"]["snapshots"]
                        .as_array()
                        .unwrap()
                        .is_empty(),
                    _ => {
                        let mut any = false;
                        for sid in &sessions {
                            any |= state_of(&alice, sid).await["data"]["state"] == "archived";
                        }
                        any
                    }
                };
                if seen {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            first.kill9();

            let second = WharfProcess::start(&config);
            let alice = TenantClient {
                url: &second.url,
                token: ALICE,
            };
            let bob = TenantClient {
                url: &second.url,
                token: BOB,
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            while !truthful(&alice, backend, &sessions).await {
                assert!(
                    Instant::now() < deadline,
                    "{engine}, killed at {kill_when}: sessions {:?}, snapshots {}, images {:?}",
                    futures_states(&alice, &sessions).await,
                    alice.get("/v1/snapshots").await,
                    images_labelled("wharf.snapshot.backend", backend)
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let kept = bob.get(&format!("/v1/snapshots/{bobs}")).await;
            assert_eq!(
                kept["data"]["state"], "ready",
                "{engine}: bob's is untouched: {kept}"
            );
            assert_eq!(images_labelled("wharf.snapshot", &bobs).len(), 1);
            for sid in &sessions {
                let back = call(&alice, backend, sid, "cat note").await;
                assert_eq!(back["code"], 0, "{engine}: {back}");
                assert_eq!(
                    back["data"]["result"]["stdout"], "kept\n",
                    "{engine}: {back}"
                );
                alice.delete(&format!("/v1/sessions/{sid}")).await;
            }
            bob.delete(&format!("/v1/snapshots/{bobs}")).await;
            drop(second);
            remove_backend_containers(backend);
            remove_backend_snapshots(backend);
        }
    }
}

async fn futures_states(alice: &TenantClient<'_>, sessions: &[String]) -> Vec<Value> {
    let mut states = Vec::new();
    for sid in sessions {
        let shown = state_of(alice, sid).await;
        states.push(json!([
            shown["data"]["state"],
            shown["data"]["archive"],
            containers_labelled("wharf.session", sid).len()
        ]));
    }
    states
}

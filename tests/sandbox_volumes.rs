//! Named volumes (issue 37, docs/agents.md "Volumes"), through a real `wharf serve`, real
//! Docker and docker-provider sandboxes, on SQLite and PostgreSQL: a volume one session
//! writes is read by the next session of its tenant and after a host restart; another
//! tenant can neither see, mount nor delete it (4007); one that is not shared is mounted by
//! one sandbox at a time and is not deleted while mounted (4090); a backend without
//! `grants.volumes` mounts none (4030); mount paths outside a plain absolute path are
//! refused; the `volumes` quota counts them, and a tenant past `volume_bytes` has its
//! writers stopped and mounts read-only until it deletes.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wharf_integration_tests::processes::{WharfProcess, store_urls, wharf_bin};
use wharf_integration_tests::tenant_client::TenantClient;
use wharf_integration_tests::{docker_ready, eventually, remove_backend_containers};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

fn write_config(dir: &Path, backend: &str, store: &str, quotas: &str) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"
store_url = "{store}"
sweep_interval_seconds = 1

[[auth.tokens]]
name = "alice"
value = "{ALICE}"
scopes = ["read", "call"]

[[auth.tokens]]
name = "bob"
value = "{BOB}"
scopes = ["read", "call"]

{quotas}

[backends.{backend}]
path = "bundled:docker-provider"
[backends.{backend}.grants]
images = ["wharf-sandbox:test"]
volumes = true

[backends.{backend}-plain]
path = "bundled:docker-provider"
[backends.{backend}-plain.grants]
images = ["wharf-sandbox:test"]
"#,
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

/// A session of `backend` mounting `volumes`; the whole reply.
async fn session(client: &TenantClient<'_>, backend: &str, key: &str, volumes: Value) -> Value {
    client
        .post(
            "/v1/sessions",
            json!({"backend": backend, "key": key, "config": {"volumes": volumes}}),
        )
        .await
}

fn id_of(reply: &Value) -> String {
    assert_eq!(reply["code"], 0, "{reply}");
    reply["data"]["id"].as_str().expect("an id").to_string()
}

fn engine_volumes_labelled(value: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args([
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("label=wharf.volume={value}"),
        ])
        .output()
        .expect("docker volume ls runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn cli(url: &str, token: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(wharf_bin())
        .arg("volumes")
        .args(args)
        .args(["--url", url])
        .env("WHARF_TOKEN", token)
        .output()
        .expect("wharf runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_outlives_its_sessions_and_restarts_for_its_tenant_only() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        let backend = format!("vol{engine}");
        remove_backend_containers(&backend);
        let home = dir.path().join(engine);
        std::fs::create_dir_all(&home).unwrap();
        let config = write_config(&home, &backend, &store, "");
        let host = WharfProcess::start(&config);
        let alice = TenantClient {
            url: &host.url,
            token: ALICE,
        };
        let bob = TenantClient {
            url: &host.url,
            token: BOB,
        };

        // Names: checked, unique within a tenant, each tenant's own.
        let data = id_of(&alice.post("/v1/volumes", json!({"name": "data"})).await);
        assert!(data.starts_with("vol_"), "{data}");
        let again = alice.post("/v1/volumes", json!({"name": "data"})).await;
        assert_eq!(again["code"], 4090, "{again}");
        for bad in ["../x", "", "a/b", "-x", &"n".repeat(65)] {
            let refused = alice.post("/v1/volumes", json!({"name": bad})).await;
            assert_eq!(refused["code"], 4004, "{bad:?}: {refused}");
        }
        let bobs = id_of(&bob.post("/v1/volumes", json!({"name": "data"})).await);
        assert_eq!(engine_volumes_labelled(&data).len(), 1);

        // Another tenant sees, mounts and deletes nothing of it.
        let listed = bob.get("/v1/volumes").await;
        let names: Vec<&Value> = listed["data"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .collect();
        assert_eq!(names.len(), 1, "{listed}");
        assert_eq!(names[0]["id"], bobs.as_str());
        for reply in [
            bob.get(&format!("/v1/volumes/{data}")).await,
            bob.delete(&format!("/v1/volumes/{data}")).await,
        ] {
            assert_eq!(reply["code"], 4007, "{reply}");
        }
        // Bob's `data` is his own volume: empty, whatever Alice writes in hers.
        let bob_session = id_of(
            &session(
                &bob,
                &backend,
                "b1",
                json!([{"name": "data", "path": "/data"}]),
            )
            .await,
        );

        // Hostile mount paths and names never reach the engine.
        for (volumes, why) in [
            (json!([{"name": "data", "path": "data"}]), "relative"),
            (json!([{"name": "data", "path": "/a/../etc"}]), "dot-dot"),
            (json!([{"name": "data", "path": "/proc/x"}]), "the kernel's"),
            (
                json!([{"name": "data", "path": "/.wharf/run"}]),
                "the agent's",
            ),
            (json!([{"name": "data", "path": "/"}]), "the root"),
            (json!([{"name": "data", "path": "/x:/y"}]), "a colon"),
            (
                json!([{"name": "data", "path": "/a"}, {"name": "data", "path": "/b"}]),
                "twice",
            ),
            (json!([{"name": "../data", "path": "/a"}]), "a bad name"),
            (
                json!([{"name": "data", "path": "/a", "rw": true}]),
                "an unknown field",
            ),
        ] {
            let refused = session(&alice, &backend, "bad", volumes).await;
            assert_eq!(refused["code"], 4004, "{why}: {refused}");
        }
        let unknown = session(
            &alice,
            &backend,
            "unknown",
            json!([{"name": "nope", "path": "/data"}]),
        )
        .await;
        assert_eq!(unknown["code"], 4007, "{unknown}");
        let plain = session(
            &alice,
            &format!("{backend}-plain"),
            "plain",
            json!([{"name": "data", "path": "/data"}]),
        )
        .await;
        assert_eq!(plain["code"], 4030, "{plain}");
        assert!(plain.to_string().contains("grants.volumes"), "{plain}");

        // Written by one session...
        let first = id_of(
            &session(
                &alice,
                &backend,
                "first",
                json!([{"name": "data", "path": "/data"}]),
            )
            .await,
        );
        alice
            .run(
                &backend,
                &first,
                "echo kept > /data/note && mkdir -p /data/d && echo deep > /data/d/f",
            )
            .await;
        let seen = bob.run(&backend, &bob_session, "ls -A /data | wc -l").await;
        assert_eq!(seen["stdout"], "0\n", "bob's volume is his own: {seen}");
        // ...held by it alone (not shared), and not deleted while mounted.
        let second = session(
            &alice,
            &backend,
            "second",
            json!([{"name": "data", "path": "/data"}]),
        )
        .await;
        assert_eq!(second["code"], 4090, "{second}");
        let busy = alice.delete(&format!("/v1/volumes/{data}")).await;
        assert_eq!(busy["code"], 4090, "{busy}");
        assert_eq!(
            alice.delete(&format!("/v1/sessions/{first}")).await["code"],
            0
        );

        // ...read by the next, here read-only.
        let next = id_of(
            &session(
                &alice,
                &backend,
                "next",
                json!([{"name": "data", "path": "/mnt/data", "read_only": true}]),
            )
            .await,
        );
        let read = alice
            .run(
                &backend,
                &next,
                "cat /mnt/data/note /mnt/data/d/f; touch /mnt/data/x 2>&1 || echo refused",
            )
            .await;
        let out = read["stdout"].as_str().unwrap();
        assert!(out.starts_with("kept\ndeep\n"), "{read}");
        assert!(out.contains("Read-only file system"), "{read}");
        assert_eq!(
            alice.delete(&format!("/v1/sessions/{next}")).await["code"],
            0
        );

        // A sweep after the writes measures them (it may have measured the volume empty
        // before); the scrape shows the tenant's count and bytes.
        eventually(20, "the written volume is measured", async || {
            alice.get(&format!("/v1/volumes/{data}")).await["data"]["bytes"]
                .as_u64()
                .unwrap_or(0)
                > 0
        })
        .await;
        let shown = alice.get("/v1/volumes/data").await;
        assert_eq!(shown["data"]["id"], data.as_str(), "by name: {shown}");
        assert!(
            shown["data"]["measured_at_ms"].as_u64().unwrap() > 0,
            "{shown}"
        );
        let metrics = alice.metrics().await;
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("wharf_tenant_volumes{")
                    && l.contains("alice")
                    && l.ends_with(" 1")),
            "{metrics}"
        );
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("wharf_tenant_volume_bytes{") && l.contains("alice")),
            "{metrics}"
        );

        // A host restart keeps it, files and all.
        assert!(host.terminate(Duration::from_secs(30)), "a clean stop");
        let host = WharfProcess::start(&config);
        let alice = TenantClient {
            url: &host.url,
            token: ALICE,
        };
        let after = id_of(
            &session(
                &alice,
                &backend,
                "after",
                json!([{"name": "data", "path": "/data"}]),
            )
            .await,
        );
        let read = alice.run(&backend, &after, "cat /data/note").await;
        assert_eq!(read["stdout"], "kept\n", "{read}");
        assert_eq!(
            alice.delete(&format!("/v1/sessions/{after}")).await["code"],
            0
        );

        // The command line lists and deletes; the engine's volume goes with it.
        let (ok, listed) = cli(&host.url, ALICE, &["list"]);
        assert!(
            ok && listed.contains(&data) && listed.contains("data"),
            "{listed}"
        );
        let (ok, made) = cli(&host.url, ALICE, &["create", "scratch", "--shared"]);
        assert!(ok && made.trim().starts_with("vol_"), "{made}");
        let (ok, out) = cli(&host.url, ALICE, &["delete", "data"]);
        assert!(ok, "{out}");
        assert!(engine_volumes_labelled(&data).is_empty());
        assert_eq!(
            alice.get(&format!("/v1/volumes/{data}")).await["code"],
            4007
        );
        let (ok, out) = cli(&host.url, ALICE, &["delete", "scratch"]);
        assert!(ok, "{out}");
        // Bob's is untouched.
        assert_eq!(engine_volumes_labelled(&bobs).len(), 1);
        let bob = TenantClient {
            url: &host.url,
            token: BOB,
        };
        assert_eq!(
            bob.delete(&format!("/v1/sessions/{bob_session}")).await["code"],
            0
        );
        assert_eq!(bob.delete(&format!("/v1/volumes/{bobs}")).await["code"], 0);
        drop(host);
        remove_backend_containers(&backend);
        remove_backend_containers(&format!("{backend}-plain"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_volume_quota_is_stopped_and_mounts_read_only() {
    if !docker_ready() {
        return;
    }
    let backend = "volquota";
    remove_backend_containers(backend);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}?mode=rwc", dir.path().join("s.db").display());
    let quotas = "[quotas.tokens.alice]\nvolumes = 2\nvolume_bytes = 1048576\n";
    let host = WharfProcess::start(&write_config(dir.path(), backend, &store, quotas));
    let alice = TenantClient {
        url: &host.url,
        token: ALICE,
    };

    // An engine volume of this node that no row names (a create that landed after a
    // crash) is swept; one of another node is not touched.
    let node = std::fs::read_to_string(dir.path().join("data/node-id")).unwrap();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let make = |name: &str, volume: &str, node: &str| {
        let out = std::process::Command::new("docker")
            .args([
                "volume",
                "create",
                "--label",
                &format!("wharf.volume={volume}"),
            ])
            .args(["--label", &format!("wharf.node={node}")])
            .args(["--label", "wharf.volume.created=0", name])
            .output()
            .expect("docker volume create runs");
        assert!(out.status.success(), "{out:?}");
    };
    let (orphan, foreign) = (format!("vol_o{suffix}"), format!("vol_f{suffix}"));
    make(&format!("wharf-vol-o{suffix}"), &orphan, node.trim());
    make(&format!("wharf-vol-f{suffix}"), &foreign, "node-elsewhere");
    eventually(30, "the orphan is swept", async || {
        engine_volumes_labelled(&orphan).is_empty()
    })
    .await;
    assert_eq!(engine_volumes_labelled(&foreign).len(), 1);
    let _ = std::process::Command::new("docker")
        .args(["volume", "rm", &format!("wharf-vol-f{suffix}")])
        .output();

    let big = id_of(
        &alice
            .post("/v1/volumes", json!({"name": "big", "shared": true}))
            .await,
    );
    let small = id_of(&alice.post("/v1/volumes", json!({"name": "small"})).await);
    let third = alice.post("/v1/volumes", json!({"name": "third"})).await;
    assert_eq!(third["code"], 4030, "{third}");
    assert_eq!(third["data"]["quota"], "volumes", "{third}");

    // Shared: two sandboxes mount it at once.
    let writer = id_of(
        &session(
            &alice,
            backend,
            "writer",
            json!([{"name": "big", "path": "/big"}]),
        )
        .await,
    );
    let reader = id_of(
        &session(
            &alice,
            backend,
            "reader",
            json!([{"name": "big", "path": "/big", "read_only": true}]),
        )
        .await,
    );
    alice
        .run(
            backend,
            &writer,
            "dd if=/dev/urandom of=/big/blob bs=1M count=3 2>/dev/null; sync",
        )
        .await;
    // The sweep measures 3 MiB against 1 MiB: the writer is stopped, the reader is not.
    eventually(30, "the writer is stopped", async || {
        alice.get(&format!("/v1/sessions/{writer}")).await["code"] == 4007
    })
    .await;
    let shown = alice.get(&format!("/v1/volumes/{big}")).await;
    assert!(
        shown["data"]["bytes"].as_u64().unwrap() >= 3 << 20,
        "{shown}"
    );
    assert_eq!(
        alice.get(&format!("/v1/sessions/{reader}")).await["code"],
        0,
        "a read-only mount writes nothing"
    );
    let read = alice.run(backend, &reader, "wc -c < /big/blob").await;
    assert_eq!(read["stdout"], "3145728\n", "{read}");
    // Past the quota: read-write mounts are refused, read-only ones are not.
    let refused = session(
        &alice,
        backend,
        "rw",
        json!([{"name": "small", "path": "/s"}]),
    )
    .await;
    assert_eq!(refused["code"], 4030, "{refused}");
    assert_eq!(refused["data"]["quota"], "volume_bytes", "{refused}");
    assert_eq!(
        alice.delete(&format!("/v1/sessions/{reader}")).await["code"],
        0
    );
    // Deleting what holds the bytes ends it.
    assert_eq!(alice.delete(&format!("/v1/volumes/{big}")).await["code"], 0);
    let rw = id_of(
        &session(
            &alice,
            backend,
            "rw2",
            json!([{"name": "small", "path": "/s"}]),
        )
        .await,
    );
    alice.run(backend, &rw, "echo ok > /s/f").await;
    assert_eq!(alice.delete(&format!("/v1/sessions/{rw}")).await["code"], 0);

    // A volume this engine does not hold (another node's engine, or removed behind the
    // host's back) is refused, never replaced by the empty one Docker would make.
    let names = engine_volumes_labelled(&small);
    assert_eq!(names.len(), 1);
    let docker_volume = |verb: &str| {
        std::process::Command::new("docker")
            .args(["volume", verb, &names[0]])
            .output()
            .expect("docker volume runs")
            .status
            .success()
    };
    assert!(docker_volume("rm"));
    let elsewhere = session(
        &alice,
        backend,
        "elsewhere",
        json!([{"name": "small", "path": "/s"}]),
    )
    .await;
    assert_eq!(elsewhere["code"], 4090, "{elsewhere}");
    assert!(
        !docker_volume("inspect"),
        "no empty volume of its name was made"
    );
    assert_eq!(
        alice.delete(&format!("/v1/volumes/{small}")).await["code"],
        0
    );
    drop(host);
    remove_backend_containers(backend);
}

const CAROL: &str = "carol-token-0123456789";

/// Carol's engine volumes: each one's volume id.
fn carols_engine_volumes() -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args([
            "volume",
            "ls",
            "--filter",
            "label=wharf.volume.tenant=carol",
            "--format",
            "{{.Label \"wharf.volume\"}}",
        ])
        .output()
        .expect("docker volume ls runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether each of carol's volume rows is ready with its engine volume, and each of her
/// engine volumes has a row.
async fn volumes_accounted(carol: &TenantClient<'_>) -> Result<usize, String> {
    let listed = carol.get("/v1/volumes").await;
    let rows = listed["data"]["volumes"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("{listed}"))?;
    let engine = carols_engine_volumes();
    for row in &rows {
        let id = row["id"].as_str().unwrap_or_default().to_string();
        if row["state"] != "ready" || !engine.contains(&id) {
            return Err(format!("row {row}, engine volumes {engine:?}"));
        }
    }
    if engine.len() != rows.len() {
        return Err(format!("engine volumes {engine:?}, rows {rows:?}"));
    }
    Ok(rows.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_while_volumes_are_made_leaves_each_whole_or_gone() {
    if !docker_ready() {
        return;
    }
    let backend = "volcrash";
    let dir = tempfile::tempdir().unwrap();
    let carol = format!(
        "[quotas.default]\nvolumes = 64\n\n[[auth.tokens]]\nname = \"carol\"\nvalue = \"{CAROL}\"\nscopes = [\"read\", \"call\"]"
    );
    for (engine, store) in store_urls(dir.path()) {
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        let config = write_config(dir.path(), backend, &store, &carol);
        let first = WharfProcess::start(&config);
        let creates: Vec<_> = (0..24)
            .map(|i| {
                let url = first.url.clone();
                tokio::spawn(async move {
                    let _ = reqwest::Client::new()
                        .post(format!("{url}/v1/volumes"))
                        .bearer_auth(CAROL)
                        .json(&json!({"name": format!("crash-{i}")}))
                        .send()
                        .await;
                })
            })
            .collect();
        // Killed as the first engine volume appears: the others are rows, creates in
        // flight, or not begun.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while carols_engine_volumes().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "{engine}: no volume was made"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        first.kill9();
        for create in creates {
            create.abort();
        }

        let second = WharfProcess::start(&config);
        let client = TenantClient {
            url: &second.url,
            token: CAROL,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let kept = loop {
            match volumes_accounted(&client).await {
                Ok(n) => break n,
                Err(why) => assert!(std::time::Instant::now() < deadline, "{engine}: {why}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        eprintln!("{engine}: {kept} of 24 volumes were made whole before the kill");
        // What is kept is whole: each is deleted with its engine volume.
        let listed = client.get("/v1/volumes").await;
        for row in listed["data"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let id = row["id"].as_str().unwrap_or_default();
            assert_eq!(client.delete(&format!("/v1/volumes/{id}")).await["code"], 0);
        }
        assert!(carols_engine_volumes().is_empty(), "{engine}");
        drop(second);
    }
}

//! Hardening of the Docker imports, driven from outside as an attacker would, through a real
//! host, a real backend (`probe`) and real Docker: a symlink inside a granted directory does
//! not mount what it points to and mounts are read-only unless an `rw:` grant says so; a
//! burst of creates never exceeds `max_containers`, in one process or across two nodes
//! sharing a store; a process a command leaves behind cannot take the next command's line
//! from the resident shell and answer for it.

use serde_json::json;
use std::time::Duration;
use wharf_integration_tests::{
    TestHost, bundled, containers_labelled, docker_ready, start, start_with,
};

fn probe(grants: impl FnOnce(&mut wharf::policy::Grants)) -> wharf::config::BackendConfig {
    let mut cfg = bundled("probe");
    cfg.grants.images = vec!["wharf-sandbox:test".into()];
    grants(&mut cfg.grants);
    cfg
}

/// Removes the containers of `backend` (every test uses a backend name of its own).
fn remove_all(backend: &str) {
    for id in containers_labelled("wharf.backend", backend) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &id])
            .output();
    }
}

async fn create(
    h: &TestHost,
    backend: &str,
    args: serde_json::Value,
) -> (u16, u64, serde_json::Value) {
    let r = h.call(&format!("{backend}:create"), args).await;
    (r.status, r.code(), r.body)
}

async fn exec(h: &TestHost, backend: &str, id: &str, command: &str) -> String {
    let r = h
        .call(
            &format!("{backend}:exec"),
            json!({"id": id, "command": command}),
        )
        .await;
    assert_eq!(r.code(), 0, "{command}: {}", r.body);
    r.body["data"]["result"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_out_of_a_grant_or_a_path_that_is_not_there_is_refused() {
    if !docker_ready() {
        return;
    }
    let granted = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret"), "host secret").unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), granted.path().join("link")).unwrap();
    std::fs::create_dir(granted.path().join("inside")).unwrap();
    let g = granted.path().display().to_string();
    let backend = "h2symlink";
    remove_all(backend);
    let h = start(vec![(
        backend,
        probe(|gr| gr.host_mounts = vec![g.clone()]),
    )])
    .await;

    for (path, why) in [
        (format!("{g}/link"), "grants.host_mounts"),
        (format!("{g}/link/secret"), "grants.host_mounts"),
        (format!("{g}/missing"), "cannot be resolved"),
        (format!("{g}/inside/../link"), "without `..`"),
        ("relative/path".to_string(), "absolute"),
    ] {
        let (status, code, body) = create(
            &h,
            backend,
            json!({"image": "wharf-sandbox:test", "mounts": [path]}),
        )
        .await;
        assert_eq!((status, code), (403, 4030), "{path}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{path}: {body}");
    }
    assert!(
        containers_labelled("wharf.backend", backend).is_empty(),
        "nothing was created"
    );

    // Inside the grant still works.
    let (_, code, body) = create(
        &h,
        backend,
        json!({"image": "wharf-sandbox:test", "mounts": [format!("{g}/inside")]}),
    )
    .await;
    assert_eq!(code, 0, "{body}");
    assert_eq!(h.get("/healthz").await.status, 200);
    remove_all(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_are_read_only_unless_an_rw_grant_says_so() {
    if !docker_ready() {
        return;
    }
    let ro = tempfile::tempdir().unwrap();
    let rw = tempfile::tempdir().unwrap();
    let (ro_path, rw_path) = (
        ro.path().display().to_string(),
        rw.path().display().to_string(),
    );
    let backend = "h2readonly";
    remove_all(backend);
    let h = start(vec![(
        backend,
        probe(|gr| gr.host_mounts = vec![ro_path.clone(), format!("rw:{rw_path}")]),
    )])
    .await;

    // The guest asking for a writable mount of a plain grant is refused, not obeyed.
    let (status, code, body) = create(
        &h,
        backend,
        json!({"image": "wharf-sandbox:test", "mounts": [ro_path], "read_write": true}),
    )
    .await;
    assert_eq!((status, code), (403, 4030), "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("rw:"),
        "{body}"
    );
    assert!(containers_labelled("wharf.backend", backend).is_empty());

    // Read-only through a plain grant: a write fails inside the container.
    let (_, code, body) = create(
        &h,
        backend,
        json!({"image": "wharf-sandbox:test", "mounts": [ro_path]}),
    )
    .await;
    assert_eq!(code, 0, "{body}");
    let id = body["data"]["result"].as_str().unwrap().to_string();
    let out = exec(
        &h,
        backend,
        &id,
        "echo x > /mnt/data/f 2>/dev/null; echo $?",
    )
    .await;
    assert_ne!(out.trim(), "0", "the write went through a read-only grant");
    assert!(!ro.path().join("f").exists());

    // An `rw:` grant lets the guest write (so the check above can fail).
    let (_, code, body) = create(
        &h,
        backend,
        json!({"image": "wharf-sandbox:test", "mounts": [rw_path], "read_write": true}),
    )
    .await;
    assert_eq!(code, 0, "{body}");
    let id = body["data"]["result"].as_str().unwrap().to_string();
    let out = exec(&h, backend, &id, "echo x > /mnt/data/f; echo $?").await;
    assert_eq!(out.trim(), "0");
    assert!(rw.path().join("f").exists());
    remove_all(backend);
}

/// Fires `n` creates at once at each host; returns how many succeeded. Every refusal must
/// be the cap's.
async fn burst(hosts: &[&TestHost], backend: &str, n: usize) -> usize {
    let calls = hosts.iter().flat_map(|h| {
        (0..n).map(move |_| create(h, backend, json!({"image": "wharf-sandbox:test"})))
    });
    let mut created = 0;
    for (status, code, body) in futures::future::join_all(calls).await {
        if code == 0 {
            created += 1;
        } else {
            assert_eq!((status, code), (403, 4030), "{body}");
            assert!(
                body["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("max_containers"),
                "{body}"
            );
        }
    }
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_burst_never_exceeds_max_containers() {
    if !docker_ready() {
        return;
    }
    let backend = "h2cap";
    remove_all(backend);
    let h = start(vec![(backend, probe(|gr| gr.max_containers = 2))]).await;
    let created = burst(&[&h], backend, 8).await;
    let live = containers_labelled("wharf.backend", backend).len();
    remove_all(backend);
    assert_eq!(created, 2, "exactly the cap is created");
    assert_eq!(live, 2, "and exactly the cap exists");
    assert_eq!(h.get("/healthz").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_sharing_a_store_never_exceed_max_containers_together() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in wharf_integration_tests::processes::store_urls(dir.path()) {
        let backend = format!("h2capshared{engine}");
        remove_all(&backend);
        let a = start_with(
            vec![(backend.as_str(), probe(|gr| gr.max_containers = 2))],
            |s| s.store_url = Some(store.clone()),
        )
        .await;
        let b = start_with(
            vec![(backend.as_str(), probe(|gr| gr.max_containers = 2))],
            |s| s.store_url = Some(store.clone()),
        )
        .await;
        let created = burst(&[&a, &b], &backend, 4).await;
        let live = containers_labelled("wharf.backend", &backend).len();
        remove_all(&backend);
        assert_eq!(
            created, 2,
            "{engine}: exactly the cap is created across both nodes"
        );
        assert_eq!(live, 2, "{engine}: and exactly the cap exists");
    }
}

/// Planted by a command, it survives it (`setsid`), stops the resident shell, takes the
/// next command's line from the shell's stdin, and answers in its place with the frames
/// built from the nonce it read.
const THIEF: &str = r#"cat > /tmp/thief.sh <<'EOF'
s=$1
sleep 0.5
kill -STOP "$s"
exec 3< "/proc/$s/fd/0"
line=$(dd bs=65536 count=1 <&3 2>/dev/null)
n=$(printf '%s' "$line" | sed -n "s/.*printf '%s:end;' \([0-9a-f]*\) >&2.*/\1/p")
printf 'FORGED%s:end:0:0;' "$n" > "/proc/$s/fd/1"
printf '%s:pid:1;%s:end;' "$n" "$n" > "/proc/$s/fd/2"
kill -CONT "$s"
EOF
echo written"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_leftover_cannot_answer_for_the_next_command() {
    if !docker_ready() {
        return;
    }
    let backend = "h2leftover";
    remove_all(backend);
    let h = start(vec![(backend, probe(|_| {}))]).await;
    let (_, code, body) = create(&h, backend, json!({"image": "wharf-sandbox:test"})).await;
    assert_eq!(code, 0, "{body}");
    let id = body["data"]["result"].as_str().unwrap().to_string();

    assert_eq!(exec(&h, backend, &id, THIEF).await, "written\n");
    // `$PPID` of a command is the shell that runs it.
    let planted = exec(
        &h,
        backend,
        &id,
        // The pause lets the thief leave the command's group before the command ends.
        "setsid sh /tmp/thief.sh $PPID >/dev/null 2>&1 < /dev/null & sleep 0.3; echo planted",
    )
    .await;
    assert_eq!(planted, "planted\n");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    for i in 0..3 {
        let out = exec(&h, backend, &id, &format!("echo mine {i}")).await;
        assert_eq!(
            out,
            format!("mine {i}\n"),
            "the next command's output is its own"
        );
    }
    assert_eq!(h.get("/healthz").await.status, 200);
    remove_all(backend);
}

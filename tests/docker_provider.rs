//! The docker sandbox provider (a Wasm component using only the container and exec imports)
//! with the host's standard sandbox toolset, against the real Docker engine.

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};
use wharf_integration_tests::{
    TestHost, containers_labelled, docker_provider, docker_ready, start, start_with,
};

async fn host() -> TestHost {
    start_with(vec![("docker", docker_provider())], |s| {
        s.max_body_bytes = 32 << 20
    })
    .await
}

async fn session(h: &TestHost, key: &str) -> String {
    let r = h
        .post("/v1/sessions", json!({"backend": "docker", "key": key}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

async fn run(h: &TestHost, s: &str, command: &str) -> Value {
    let r = h
        .call_in(s, "docker:run_command", json!({"command": command}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["result"].clone()
}

fn sha(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_and_big_files_round_trip() {
    if !docker_ready() {
        return;
    }
    let h = host().await;
    let s = session(&h, "files").await;
    let hi = run(&h, &s, "echo hi").await;
    assert_eq!(
        (hi["stdout"].as_str(), hi["exit_code"].as_i64()),
        (Some("hi\n"), Some(0))
    );
    let fail = run(&h, &s, "echo oops >&2; exit 3").await;
    assert_eq!(
        (fail["stderr"].as_str(), fail["exit_code"].as_i64()),
        (Some("oops\n"), Some(3))
    );

    // 10 MiB of binary written through the tool and read back through export, identical.
    let data: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let w = h
        .call_in(&s, "docker:write_file", json!({"path": "/work/blob.bin", "content": base64::engine::general_purpose::STANDARD.encode(&data), "encoding": "base64"}))
        .await;
    assert_eq!(w.code(), 0, "{}", w.body);
    let e = h
        .call_in(&s, "docker:export_file", json!({"path": "/work/blob.bin"}))
        .await;
    assert_eq!(e.code(), 0, "{}", e.body);
    let back = base64::engine::general_purpose::STANDARD
        .decode(e.body["data"]["result"]["content_base64"].as_str().unwrap())
        .unwrap();
    assert!(back == data, "the 10 MiB file came back different");
    assert_eq!(e.body["data"]["result"]["sha256"], sha(&data));

    // A 20 MiB file made inside the sandbox, exported in 4 MiB slices, matches its sha256.
    let made = run(
        &h,
        &s,
        "dd if=/dev/urandom of=big.bin bs=1048576 count=20 2>/dev/null && sha256sum big.bin",
    )
    .await;
    let inside = made["stdout"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let e = h
        .call_in(&s, "docker:export_file", json!({"path": "big.bin"}))
        .await;
    assert_eq!(e.body["data"]["result"]["size"], 20 * 1024 * 1024);
    assert_eq!(e.body["data"]["result"]["sha256"], inside.as_str());
    let read = h
        .call_in(&s, "docker:read_file", json!({"path": "big.bin"}))
        .await;
    assert_eq!(read.code(), 4000, "too large for read_file: {}", read.body);

    // The same file over the streaming route, and an upload through it.
    let bytes = reqwest::get(format!("{}/v1/sessions/{s}/files?path=big.bin", h.url))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(sha(&bytes), inside);
    let put = reqwest::Client::new()
        .put(format!(
            "{}/v1/sessions/{s}/files?path=up/loaded.bin",
            h.url
        ))
        .body(data.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let check = run(&h, &s, "sha256sum up/loaded.bin").await;
    assert!(
        check["stdout"].as_str().unwrap().starts_with(&sha(&data)),
        "{check}"
    );
    h.delete(&format!("/v1/sessions/{s}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_tools_and_hostile_names() {
    if !docker_ready() {
        return;
    }
    let h = host().await;
    let s = session(&h, "text").await;
    let name = "x'; rm -rf / #";
    let w = h
        .call_in(
            &s,
            "docker:write_file",
            json!({"path": name, "content": "one\ntwo\nthree\nfour\n"}),
        )
        .await;
    assert_eq!(w.code(), 0, "{}", w.body);
    // The `/` makes it a directory `x'; rm -rf ` holding a file ` #`.
    let list = h.call_in(&s, "docker:list_directory", json!({})).await;
    let names: Vec<&str> = list.body["data"]["result"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"x'; rm -rf "), "{names:?}");
    let inner = h
        .call_in(&s, "docker:list_directory", json!({"path": "x'; rm -rf "}))
        .await;
    assert_eq!(
        inner.body["data"]["result"]["entries"][0]["name"], " #",
        "{}",
        inner.body
    );
    assert_eq!(inner.body["data"]["result"]["entries"][0]["kind"], "file");
    assert_eq!(inner.body["data"]["result"]["entries"][0]["size"], 19);
    let r = h
        .call_in(
            &s,
            "docker:read_file",
            json!({"path": name, "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(
        r.body["data"]["result"]["content"], "two\nthree\n",
        "{}",
        r.body
    );
    assert_eq!(r.body["data"]["result"]["total_lines"], 4);
    let weird = "dir with space/$(touch pwned)\nline.txt";
    assert_eq!(
        h.call_in(
            &s,
            "docker:write_file",
            json!({"path": weird, "content": "ok"})
        )
        .await
        .code(),
        0
    );
    assert_eq!(
        h.call_in(&s, "docker:read_file", json!({"path": weird}))
            .await
            .body["data"]["result"]["content"],
        "ok"
    );
    assert_eq!(
        run(&h, &s, "ls pwned 2>/dev/null | wc -l").await["stdout"],
        "0\n"
    );
    assert_eq!(
        run(&h, &s, "[ -x /bin/busybox ] && [ -d /work ] && echo intact").await["stdout"],
        "intact\n",
        "rm -rf / never ran"
    );

    let rep = h
        .call_in(
            &s,
            "docker:str_replace",
            json!({"path": name, "old": "three", "new": "3"}),
        )
        .await;
    assert_eq!(rep.code(), 0, "{}", rep.body);
    assert_eq!(
        h.call_in(&s, "docker:read_file", json!({"path": name}))
            .await
            .body["data"]["result"]["content"],
        "one\ntwo\n3\nfour\n"
    );
    assert_eq!(
        h.call_in(
            &s,
            "docker:str_replace",
            json!({"path": name, "old": "zzz", "new": "y"})
        )
        .await
        .code(),
        4001
    );

    let missing = h
        .call_in(&s, "docker:read_file", json!({"path": "nope.txt"}))
        .await;
    assert_eq!(missing.code(), 4000);
    assert!(
        missing.body["message"]
            .as_str()
            .unwrap()
            .contains("no such file"),
        "{}",
        missing.body
    );
    run(&h, &s, "mkdir -p adir && mkfifo afifo").await;
    assert!(
        h.call_in(&s, "docker:read_file", json!({"path": "adir"}))
            .await
            .body["message"]
            .as_str()
            .unwrap()
            .contains("is a directory")
    );
    assert!(
        h.call_in(&s, "docker:read_file", json!({"path": "afifo"}))
            .await
            .body["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file")
    );
    h.delete(&format!("/v1/sessions/{s}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_cancellation_kill_the_process() {
    if !docker_ready() {
        return;
    }
    let h = host().await;
    let s = session(&h, "timeouts").await;
    let started = Instant::now();
    let r = h
        .call_in(
            &s,
            "docker:run_command",
            json!({"command": "sleep 31; echo late", "timeout_seconds": 1}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(r.body["data"]["result"]["timed_out"], true);
    assert!(r.body["data"]["result"]["exit_code"].is_null());
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(
        run(&h, &s, "ps | grep -c '[s]leep 31'").await["stdout"],
        "0\n",
        "the timed-out process is gone"
    );

    // A client that gives up mid-call: the host drops the call and its exec is killed.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let gone = client
        .post(format!("{}/v1/call", h.url))
        .json(&json!({"tool": "docker:run_command", "args": {"command": "sleep 32"}, "session_id": s}))
        .send()
        .await;
    assert!(gone.is_err());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = run(&h, &s, "ps | grep -c '[s]leep 32'").await;
        if left["stdout"] == "0\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cancelled command still runs"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let bg = h
        .call_in(
            &s,
            "docker:run_command",
            json!({"command": "sleep 60 > /dev/null 2>&1 & echo started", "timeout_seconds": 20}),
        )
        .await;
    assert_eq!(
        bg.body["data"]["result"]["stdout"], "started\n",
        "{}",
        bg.body
    );
    h.delete(&format!("/v1/sessions/{s}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroying_a_session_removes_its_container_and_is_idempotent() {
    if !docker_ready() {
        return;
    }
    let h = host().await;
    let s = session(&h, "destroy").await;
    assert_eq!(containers_labelled("wharf.session", &s).len(), 1);
    assert_eq!(run(&h, &s, "true").await["exit_code"], 0);
    let again = h
        .post(
            "/v1/sessions",
            json!({"backend": "docker", "key": "destroy"}),
        )
        .await;
    assert_eq!(
        again.body["data"]["id"],
        s.as_str(),
        "same key, same sandbox"
    );
    assert_eq!(containers_labelled("wharf.session", &s).len(), 1);
    assert_eq!(
        h.delete(&format!("/v1/sessions/{s}")).await.body["data"]["deleted"],
        true
    );
    assert!(
        containers_labelled("wharf.session", &s).is_empty(),
        "the container is gone"
    );
    assert_eq!(h.delete(&format!("/v1/sessions/{s}")).await.code(), 0);
    assert_eq!(
        h.call_in(&s, "docker:run_command", json!({"command": "true"}))
            .await
            .code(),
        4007
    );

    // The container and exec imports the provider made are counted in /metrics.
    let text = reqwest::get(format!("{}/metrics", h.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count = |import: &str| -> f64 {
        let series = format!(
            r#"wharf_host_import_calls_total{{backend="docker",import="{import}",outcome="ok"}} "#
        );
        text.lines()
            .find_map(|l| {
                l.strip_prefix(&series)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    for import in [
        "container.create",
        "container.start",
        "exec.run",
        "container.remove",
    ] {
        assert!(count(import) >= 1.0, "{import} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_the_provider_cannot_enforce_or_the_grants_forbid_are_refused() {
    if !docker_ready() {
        return;
    }
    let h = host().await;
    let r = h
        .post("/v1/sessions", json!({"backend": "docker", "key": "egress", "config": {"network": {"block_network": false, "allow_egress_to": ["example.com"]}}}))
        .await;
    assert_eq!((r.status, r.code()), (403, 4030), "{}", r.body);
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": "docker", "key": "img", "config": {"image": "ubuntu:latest"}}),
        )
        .await;
    assert_eq!((r.status, r.code()), (403, 4030), "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("grants.images"),
        "{}",
        r.body
    );
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": "docker", "key": "mem", "config": {"memory_bytes": 64u64 << 30}}),
        )
        .await;
    assert_eq!(r.code(), 4030, "{}", r.body);
    assert!(
        h.sessions_listed().await.is_empty(),
        "no session record is left behind by a refused create"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_sessions_run_commands() {
    if !docker_ready() {
        return;
    }
    let mut cfg = docker_provider();
    cfg.grants.max_containers = 40;
    let h = start(vec![("docker", cfg)]).await;
    let ids: Vec<String> = futures::future::join_all((0..8).map(|i| {
        let h = &h;
        async move { session(h, &format!("c{i}")).await }
    }))
    .await;
    let outs = futures::future::join_all(ids.iter().enumerate().map(|(i, s)| {
        let h = &h;
        async move { run(h, s, &format!("echo {i}")).await }
    }))
    .await;
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out["stdout"], format!("{i}\n"));
    }
    for s in &ids {
        h.delete(&format!("/v1/sessions/{s}")).await;
    }
}

//! The sandbox agent reached through the engine (an engine link: one exec of
//! `wharf-sandboxd --link` carrying yamux), against the real Docker engine: under gVisor
//! registered without host Unix sockets (`runsc-no-host-uds`), and on an engine reached
//! over TCP (this machine's engine behind a TCP relay: to the host, an engine elsewhere,
//! so the agent is copied in through the archive API), where the host cannot reach the
//! agent's socket. Commands, background processes and files still go through the agent
//! (not the engine's exec); what a process in the sandbox writes into the link, or killing
//! the link, costs later calls a new link, never a wrong answer.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::{
    GVISOR_WITHOUT_HOST_SOCKETS, TestHost, docker_over_tcp, docker_provider, docker_ready,
    gvisor_ready, remove_backend_containers, start_with,
};

async fn session(h: &TestHost, backend: &str) -> String {
    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": backend, "config": {"isolation": "gvisor"}}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

/// Runs `script` in the session's sandbox; its stdout (stderr appended).
async fn run(h: &TestHost, session: &str, script: &str) -> String {
    let r = h
        .call_in(session, "gl:run_command", json!({"command": script}))
        .await;
    assert_eq!(r.code(), 0, "{script}: {}", r.body);
    let result = &r.body["data"]["result"];
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    )
}

fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

/// The `wharf.agent` label of the backend's one container.
fn agent_label(backend: &str) -> String {
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "--filter",
            &format!("label=wharf.backend={backend}"),
            "--format",
            "{{.Label \"wharf.agent\"}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Finds the link process inside the sandbox (by its command line, not this script's).
const FIND_LINK: &str = "ps -o pid,args | grep 'sandboxd.--lin[k]' | awk '{print $1}' | head -1";

async fn find_link(h: &TestHost, s: &str) -> String {
    let r = h
        .call_in(
            s,
            "gl:run_command",
            json!({"command": FIND_LINK, "timeout_seconds": 5}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["result"]["stdout"]
        .as_str()
        .unwrap()
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gvisor_without_host_sockets_reaches_the_agent_through_the_engine() {
    if !docker_ready() || !gvisor_ready() {
        return;
    }
    remove_backend_containers("gl");
    let mut cfg = docker_provider();
    cfg.grants.isolation = vec!["container".into(), "gvisor".into()];
    // Under gVisor's ptrace platform the container's pids limit counts gVisor's own host
    // threads: about 80 at rest and 15–25 for each process running at once (measured). At
    // the provider's default 256 this test's ticker, commands and link reached it, and
    // gVisor stopped the sandbox; the grant's most is room enough.
    let mut config = toml::map::Map::new();
    config.insert("pids_limit".into(), toml::Value::Integer(512));
    cfg.config = Some(toml::Value::Table(config));
    let h = start_with(vec![("gl", cfg)], |s| {
        s.runtimes
            .insert("gvisor".into(), GVISOR_WITHOUT_HOST_SOCKETS.into());
    })
    .await;
    let s = session(&h, "gl").await;
    assert_eq!(
        agent_label("gl"),
        "engine",
        "the agent is reached through the engine"
    );

    let out = run(
        &h,
        &s,
        "dmesg | head -1; echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); grep PPid /proc/$$/status",
    )
    .await;
    assert!(out.contains("gVisor"), "the kernel is gVisor's: {out}");
    assert!(field(&out, "pid1=").contains("/.wharf/sandboxd"), "{out}");
    assert_eq!(
        field(&out, "PPid:"),
        "1",
        "the command is the agent's child, not an engine exec: {out}"
    );

    // A background process, read from an offset, beside 30 commands.
    let started = h
        .call_in(
            &s,
            "gl:start_process",
            json!({"command": "i=0; while :; do echo tick$i; i=$((i+1)); sleep 0.05; done"}),
        )
        .await;
    assert_eq!(started.code(), 0, "{}", started.body);
    let pid = started.body["data"]["result"]["pid"].as_u64().unwrap();
    for n in 0..30 {
        assert_eq!(run(&h, &s, &format!("echo {n}")).await, format!("{n}\n"));
    }
    let output = h
        .call_in(
            &s,
            "gl:process_output",
            json!({"pid": pid, "offset": 6, "max_bytes": 6}),
        )
        .await;
    assert_eq!(
        output.body["data"]["result"]["output"], "tick1\n",
        "{}",
        output.body
    );

    // Files through the agent, and a directory out as a tar stream.
    let wrote = h
        .call_in(
            &s,
            "gl:write_file",
            json!({"path": "d/f.txt", "content": "through the engine"}),
        )
        .await;
    assert_eq!(wrote.code(), 0, "{}", wrote.body);
    let read = h
        .call_in(&s, "gl:read_file", json!({"path": "d/f.txt"}))
        .await;
    assert_eq!(
        read.body["data"]["result"]["content"], "through the engine",
        "{}",
        read.body
    );
    let tar = reqwest::get(format!("{}/v1/sessions/{s}/files?path=d", h.url))
        .await
        .unwrap();
    assert_eq!(tar.headers()["content-type"], "application/x-tar");
    let tar = tar.bytes().await.unwrap();
    assert!(tar.windows(18).any(|w| w == b"through the engine"));

    // The attacker: root in the sandbox writes forged bytes into the link's output. Under
    // runc the link's descriptors are not root's to open (it is not dumpable); gVisor does
    // not enforce that for /proc/PID/fd (measured), so here the write lands. What it can
    // break is its own sandbox's link: the host ends a link that stops answering and starts
    // another, and no answer on the way is one the sandbox did not give.
    let link = find_link(&h, &s).await;
    assert!(!link.is_empty(), "the link runs in the sandbox");
    let _ = h
        .call_in(
            &s,
            "gl:run_command",
            json!({
                "command": format!("printf '\\000\\000\\000\\000FORGED' > /proc/{link}/fd/1; sleep 1; echo after"),
                "timeout_seconds": 2
            }),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let r = h
            .call_in(&s, "gl:run_command", json!({"command": "echo still-mine"}))
            .await;
        if r.code() == 0 {
            assert_eq!(
                r.body["data"]["result"]["stdout"], "still-mine\n",
                "{}",
                r.body
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the link never came back: {}",
            r.body
        );
    }

    // Killing the link from inside: the next calls start another, and the process the
    // agent keeps is still there.
    let link = find_link(&h, &s).await;
    // (From a background process: a command would be cut with the link it runs through.)
    let killer = h
        .call_in(
            &s,
            "gl:start_process",
            json!({"command": format!("sleep 0.3; kill -9 {link}")}),
        )
        .await;
    assert_eq!(killer.code(), 0, "{}", killer.body);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let r = h
            .call_in(&s, "gl:run_command", json!({"command": "echo relinked"}))
            .await;
        if r.code() == 0 {
            break r.body["data"]["result"]["stdout"].clone();
        }
        assert!(Instant::now() < deadline, "no new link: {}", r.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(after, json!("relinked\n"));
    let newest = find_link(&h, &s).await;
    assert_ne!(newest.trim(), link, "a new link");
    let listed = h.call_in(&s, "gl:list_processes", json!({})).await;
    assert!(
        listed.body.to_string().contains(&format!("\"pid\":{pid}")),
        "{}",
        listed.body
    );
    remove_backend_containers("gl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_engine_gets_the_agent_copied_in_and_reached_through_the_engine() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("gr");
    let engine = docker_over_tcp().await;
    let h = start_with(vec![("gr", docker_provider())], |s| {
        s.docker_host = Some(engine.clone());
    })
    .await;
    let r = h
        .post("/v1/sessions", json!({"backend": "gr", "config": null}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let s = r.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(agent_label("gr"), "engine");

    let call = |command: String| {
        let h = &h;
        let s = s.clone();
        async move {
            let r = h
                .call_in(&s, "gr:run_command", json!({"command": command}))
                .await;
            assert_eq!(r.code(), 0, "{}", r.body);
            r.body["data"]["result"]["stdout"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
    };
    let out = call(
        "echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); grep PPid /proc/$$/status; \
         echo kind=$(stat -c %F /.wharf/sandboxd); grep -c ' /.wharf/sandboxd ' /proc/mounts"
            .into(),
    )
    .await;
    assert!(field(&out, "pid1=").contains("/.wharf/sandboxd"), "{out}");
    assert_eq!(field(&out, "PPid:"), "1", "through the agent: {out}");
    assert_eq!(field(&out, "kind="), "regular file", "{out}");
    assert!(
        out.trim_end().ends_with('0'),
        "copied in, not mounted from this host: {out}"
    );

    let started = h
        .call_in(
            &s,
            "gr:start_process",
            json!({"command": "echo from-afar; sleep 30"}),
        )
        .await;
    assert_eq!(started.code(), 0, "{}", started.body);
    let pid = started.body["data"]["result"]["pid"].as_u64().unwrap();
    let output = h
        .call_in(
            &s,
            "gr:process_output",
            json!({"pid": pid, "offset": 0, "wait_ms": 5000}),
        )
        .await;
    assert_eq!(
        output.body["data"]["result"]["output"], "from-afar\n",
        "{}",
        output.body
    );
    let wrote = h
        .call_in(
            &s,
            "gr:write_file",
            json!({"path": "far.txt", "content": "copied agent"}),
        )
        .await;
    assert_eq!(wrote.code(), 0, "{}", wrote.body);
    assert_eq!(call("cat far.txt".into()).await, "copied agent");
    remove_backend_containers("gr");
}

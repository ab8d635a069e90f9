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
    GVISOR_WITHOUT_HOST_SOCKETS, TestHost, docker_over_tcp, docker_provider, docker_ready, field,
    gvisor_docker_provider, gvisor_ready, remove_backend_containers, run_script as run,
    sandbox_session as session, start_with,
};

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

/// What goes through the agent works through the link: a command is the agent's child
/// (not an engine exec); a ticking background process is read from an offset beside 30
/// commands; a file is written and read; a directory comes out as a tar stream. Returns
/// the ticking process's pid.
async fn works_through_the_agent(h: &TestHost, backend: &str, s: &str) -> u64 {
    let tool = |name: &str| format!("{backend}:{name}");
    let out = run(
        h,
        backend,
        s,
        "echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); grep PPid /proc/$$/status",
    )
    .await;
    assert!(field(&out, "pid1=").contains("/.wharf/sandboxd"), "{out}");
    assert_eq!(
        field(&out, "PPid:"),
        "1",
        "the command is the agent's child, not an engine exec: {out}"
    );

    let started = h
        .call_in(
            s,
            &tool("start_process"),
            json!({"command": "i=0; while :; do echo tick$i; i=$((i+1)); sleep 0.05; done"}),
        )
        .await;
    assert_eq!(started.code(), 0, "{}", started.body);
    let pid = started.body["data"]["result"]["pid"].as_u64().unwrap();
    for n in 0..30 {
        assert_eq!(
            run(h, backend, s, &format!("echo {n}")).await,
            format!("{n}\n")
        );
    }
    let output = h
        .call_in(
            s,
            &tool("process_output"),
            json!({"pid": pid, "offset": 6, "max_bytes": 6, "wait_ms": 5000}),
        )
        .await;
    assert_eq!(
        output.body["data"]["result"]["output"], "tick1\n",
        "{}",
        output.body
    );

    let wrote = h
        .call_in(
            s,
            &tool("write_file"),
            json!({"path": "d/f.txt", "content": "through the engine"}),
        )
        .await;
    assert_eq!(wrote.code(), 0, "{}", wrote.body);
    let read = h
        .call_in(s, &tool("read_file"), json!({"path": "d/f.txt"}))
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
    pid
}

/// Finds the link process inside the sandbox (by its command line, not this script's).
const FIND_LINK: &str = "ps -o pid,args | grep 'sandboxd.--lin[k]' | awk '{print $1}' | head -1";

async fn find_link(h: &TestHost, s: &str) -> String {
    run(h, "gl", s, FIND_LINK).await.trim().to_string()
}

/// Calls `gl:run_command "echo WORD"` until it answers (at most `within`), asserting that
/// every answer on the way is the sandbox's own.
async fn answered_again(h: &TestHost, s: &str, word: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let r = h
            .call_in(
                s,
                "gl:run_command",
                json!({"command": format!("echo {word}")}),
            )
            .await;
        if r.code() == 0 {
            assert_eq!(
                r.body["data"]["result"]["stdout"],
                format!("{word}\n"),
                "{}",
                r.body
            );
            return;
        }
        assert!(Instant::now() < deadline, "no answer again: {}", r.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gvisor_without_host_sockets_reaches_the_agent_through_the_engine() {
    if !docker_ready() || !gvisor_ready() {
        return;
    }
    remove_backend_containers("gl");
    let cfg = gvisor_docker_provider();
    let h = start_with(vec![("gl", cfg)], |s| {
        s.runtimes
            .insert("gvisor".into(), GVISOR_WITHOUT_HOST_SOCKETS.into());
    })
    .await;
    let s = session(&h, "gl", json!({"isolation": "gvisor"})).await;
    assert_eq!(
        agent_label("gl"),
        "engine",
        "the agent is reached through the engine"
    );
    let out = run(&h, "gl", &s, "dmesg | head -1").await;
    assert!(out.contains("gVisor"), "the kernel is gVisor's: {out}");
    let pid = works_through_the_agent(&h, "gl", &s).await;

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
    answered_again(&h, &s, "still-mine", Duration::from_secs(40)).await;

    // Killing the link from inside (from a background process: a command would be cut
    // with the link it runs through): the next calls start another, and the process the
    // agent keeps is still there.
    let link = find_link(&h, &s).await;
    let killer = h
        .call_in(
            &s,
            "gl:start_process",
            json!({"command": format!("sleep 0.3; kill -9 {link}")}),
        )
        .await;
    assert_eq!(killer.code(), 0, "{}", killer.body);
    tokio::time::sleep(Duration::from_secs(1)).await;
    answered_again(&h, &s, "relinked", Duration::from_secs(20)).await;
    assert_ne!(find_link(&h, &s).await, link, "a new link");
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
    let s = session(&h, "gr", serde_json::Value::Null).await;
    assert_eq!(agent_label("gr"), "engine");
    let out = run(
        &h,
        "gr",
        &s,
        "echo kind=$(stat -c %F /.wharf/sandboxd); echo mounts=$(grep -c ' /.wharf/sandboxd ' /proc/mounts)",
    )
    .await;
    assert_eq!(field(&out, "kind="), "regular file", "{out}");
    assert_eq!(
        field(&out, "mounts="),
        "0",
        "copied in, not mounted from this host: {out}"
    );
    works_through_the_agent(&h, "gr", &s).await;
    remove_backend_containers("gr");
}

//! The sandbox agent (`wharf-sandboxd`) in real containers, driven through a real host and
//! a real backend (`probe`, whose tools are the host imports): it is every container's
//! PID 1 and commands go through it; a process inside the sandbox that takes over its
//! socket cannot answer for it; background processes keep running beside commands and keep
//! their output in a bounded buffer. (Sessions, `kill -9` and streaming:
//! `sandbox_sessions.rs`.)

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf_integration_tests::{TestHost, bundled, docker_ready, remove_backend_containers, start};

fn probe() -> wharf::config::BackendConfig {
    let mut cfg = bundled("probe");
    cfg.grants.images = vec!["wharf-sandbox:test".into()];
    cfg
}

/// Calls `tool` of `backend` at `url` and returns the envelope.
async fn call_at(url: &str, tool: &str, args: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{url}/v1/call"))
        .json(&json!({"tool": tool, "args": args}))
        .send()
        .await
        .expect("the host answers")
        .json()
        .await
        .expect("JSON")
}

/// The result of a call that must succeed.
async fn ok(url: &str, tool: &str, args: Value) -> Value {
    let reply = call_at(url, tool, args.clone()).await;
    assert_eq!(reply["code"], 0, "{tool} {args}: {reply}");
    reply["data"]["result"].clone()
}

async fn sandbox(url: &str, backend: &str) -> String {
    ok(
        url,
        &format!("{backend}:create"),
        json!({"image": "wharf-sandbox:test"}),
    )
    .await
    .as_str()
    .expect("an id")
    .to_string()
}

async fn run(url: &str, backend: &str, id: &str, args: Value) -> Value {
    let mut args = args;
    args["id"] = json!(id);
    ok(url, &format!("{backend}:run"), args).await
}

/// Reads a process's output from `offset` until it has exited and everything is read.
async fn read_to_end(url: &str, backend: &str, id: &str, pid: u64, offset: u64) -> (String, Value) {
    let mut text = String::new();
    let mut offset = offset;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ok(
            url,
            &format!("{backend}:process_output"),
            json!({"id": id, "pid": pid, "offset": offset, "wait_ms": 2000}),
        )
        .await;
        text.push_str(out["text"].as_str().unwrap_or_default());
        offset = out["offset"].as_u64().unwrap() + out["len"].as_u64().unwrap();
        let process = &out["process"];
        if process["running"] == false && offset == process["output_bytes"].as_u64().unwrap() {
            return (text, process.clone());
        }
        assert!(
            Instant::now() < deadline,
            "the process did not finish: {out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_go_through_the_agent_that_is_pid_1() {
    if !docker_ready() {
        return;
    }
    let backend = "agentcmd";
    remove_backend_containers(backend);
    let h: TestHost = start(vec![(backend, probe())]).await;
    let url = h.url.clone();
    let id = sandbox(&url, backend).await;

    // PID 1 is the agent, and a command's parent is PID 1: no engine exec in between.
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "tr '\\0' ' ' < /proc/1/cmdline; echo; echo ppid=$PPID"}),
    )
    .await;
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("/.wharf/sandboxd"), "{out}");
    assert!(stdout.contains("ppid=1\n"), "{out}");

    // The contract of run_command holds: exit codes, stderr, stdin, argv with no shell,
    // users by number, tails, timeouts.
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "echo out; echo err >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        (&out["exit_code"], &out["stdout"], &out["stderr"]),
        (&json!(3), &json!("out\n"), &json!("err\n"))
    );
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "cat", "stdin": "fed\n"}),
    )
    .await;
    assert_eq!(out["stdout"], "fed\n");
    let out = run(&url, backend, &id, json!({"argv": ["/bin/echo", "a b"]})).await;
    assert_eq!(out["stdout"], "a b\n");
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "id -u", "user": "4242"}),
    )
    .await;
    assert_eq!(out["stdout"], "4242\n", "{out}");
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "yes | head -c 300000000; echo end", "max_output_bytes": 1000, "timeout_ms": 60000}),
    )
    .await;
    assert_eq!(
        (
            &out["stdout_truncated"],
            &out["stdout_len"],
            &out["exit_code"]
        ),
        (&json!(true), &json!(1000), &json!(0)),
        "300 MB of output through a 1000-byte tail"
    );
    assert!(out["stdout"].as_str().unwrap().ends_with("y\nend\n"));
    let begun = Instant::now();
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(
        (&out["timed_out"], &out["exit_code"]),
        (&json!(true), &Value::Null)
    );
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "{:?}",
        begun.elapsed()
    );
    let out = run(
        &url,
        backend,
        &id,
        // A zombie lives between a process's exit and its reaping: wait up to 2 s for none.
        json!({"command": "i=0; while [ $i -lt 20 ] && [ \"$(ps -o stat | grep -c Z)\" != 0 ]; do sleep 0.1; i=$((i+1)); done; ps -o stat | grep -c Z || true"}),
    )
    .await;
    assert_eq!(
        out["stdout"], "0\n",
        "the agent reaps what a killed command left: {out}"
    );
    let out = run(
        &url,
        backend,
        &id,
        json!({"command": "grep VmRSS /proc/1/status"}),
    )
    .await;
    let rss_kib: u64 = out["stdout"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        rss_kib < 20 * 1024,
        "agent RSS after a 300 MB flood: {rss_kib} KiB"
    );

    // Gone: answered like any missing container.
    ok(&url, &format!("{backend}:remove"), json!({"id": id})).await;
    let reply = call_at(
        &url,
        &format!("{backend}:run"),
        json!({"id": id, "command": "true"}),
    )
    .await;
    assert_eq!(reply["code"], 4000, "{reply}");
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_in_the_sandbox_that_takes_the_agents_socket_cannot_answer_for_it() {
    if !docker_ready() {
        return;
    }
    let backend = "agentimpostor";
    remove_backend_containers(backend);
    let h = start(vec![(backend, probe())]).await;
    let url = h.url.clone();
    let id = sandbox(&url, backend).await;
    assert_eq!(
        run(&url, backend, &id, json!({"command": "echo real"})).await["stdout"],
        "real\n"
    );

    // Root in the sandbox replaces the socket with its own listener: the same agent binary,
    // which would answer any command, but it is not the container's PID 1.
    let takeover = run(
        &url,
        backend,
        &id,
        json!({"command": "rm -f /.wharf/run/agent.sock; /.wharf/sandboxd --socket /.wharf/run/agent.sock >/dev/null 2>&1 & i=0; while [ ! -S /.wharf/run/agent.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; echo taken"}),
    )
    .await;
    assert_eq!(takeover["stdout"], "taken\n", "{takeover}");
    let reply = call_at(
        &url,
        &format!("{backend}:run"),
        json!({"id": id, "command": "echo forged"}),
    )
    .await;
    assert_ne!(
        reply["code"], 0,
        "the impostor's answer must not be taken: {reply}"
    );
    assert!(
        reply["message"]
            .as_str()
            .unwrap_or_default()
            .contains("another process"),
        "{reply}"
    );
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_run_beside_commands_with_bounded_output() {
    if !docker_ready() {
        return;
    }
    let backend = "agentprocs";
    remove_backend_containers(backend);
    let h = start(vec![(backend, probe())]).await;
    let url = h.url.clone();
    let id = sandbox(&url, backend).await;
    let tool = |name: &str| format!("{backend}:{name}");

    let started = ok(
        &url,
        &tool("process_start"),
        json!({"id": id, "command": "i=0; while [ $i -lt 5 ]; do echo line$i; i=$((i+1)); sleep 0.1; done"}),
    )
    .await;
    let pid = started["pid"].as_u64().unwrap();
    let (text, done) = read_to_end(&url, backend, &id, pid, 0).await;
    assert_eq!(text, "line0\nline1\nline2\nline3\nline4\n");
    assert_eq!(done["exit_code"], 0);

    // A ticking process keeps going while 100 commands run in the same sandbox.
    let ticker = ok(
        &url,
        &tool("process_start"),
        json!({"id": id, "command": "i=0; while :; do echo tick$i; i=$((i+1)); sleep 0.05; done"}),
    )
    .await["pid"]
        .as_u64()
        .unwrap();
    for n in 0..100 {
        let out = run(&url, backend, &id, json!({"command": format!("echo {n}")})).await;
        assert_eq!(out["stdout"], format!("{n}\n"));
    }
    let listed = ok(&url, &tool("process_list"), json!({"id": id})).await;
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == ticker)
        .cloned()
        .unwrap();
    assert_eq!(entry["running"], true, "{listed}");
    let from_start = ok(
        &url,
        &tool("process_output"),
        json!({"id": id, "pid": ticker, "offset": 0, "max_bytes": 12}),
    )
    .await;
    assert_eq!(from_start["text"], "tick0\ntick1\n");
    let later = ok(
        &url,
        &tool("process_output"),
        json!({"id": id, "pid": ticker, "offset": 6, "max_bytes": 6}),
    )
    .await;
    assert_eq!(later["text"], "tick1\n", "any offset can be read");

    // stdin, then a signal: SIGTERM's exit code.
    let cat = ok(
        &url,
        &tool("process_start"),
        json!({"id": id, "command": "cat"}),
    )
    .await["pid"]
        .as_u64()
        .unwrap();
    ok(
        &url,
        &tool("process_input"),
        json!({"id": id, "pid": cat, "data": "typed\n", "close": true}),
    )
    .await;
    let (text, done) = read_to_end(&url, backend, &id, cat, 0).await;
    assert_eq!((text.as_str(), &done["exit_code"]), ("typed\n", &json!(0)));
    ok(
        &url,
        &tool("process_signal"),
        json!({"id": id, "pid": ticker, "signal": "term"}),
    )
    .await;
    let (_, done) = read_to_end(&url, backend, &id, ticker, 0).await;
    assert_eq!(done["exit_code"], 143, "{done}");

    // A flood: the ring buffer keeps the newest bytes and counts what it dropped; the agent
    // and the host stay small and responsive.
    let host_before = wharf_integration_tests::processes::rss_kib(std::process::id());
    let flood = ok(
        &url,
        &tool("process_start"),
        json!({"id": id, "command": "yes", "buffer_bytes": 65536}),
    )
    .await["pid"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let begun = Instant::now();
    let quick = run(&url, backend, &id, json!({"command": "echo still"})).await;
    assert_eq!(quick["stdout"], "still\n");
    let answered_in = begun.elapsed();
    let read = ok(
        &url,
        &tool("process_output"),
        json!({"id": id, "pid": flood, "offset": 0}),
    )
    .await;
    assert!(read["dropped"].as_u64().unwrap() > 0, "{}", read["dropped"]);
    assert!(read["len"].as_u64().unwrap() <= 65536);
    assert!(
        read["process"]["output_bytes"].as_u64().unwrap() > 10 << 20,
        "{}",
        read["process"]
    );
    let rss = run(
        &url,
        backend,
        &id,
        json!({"command": "grep VmRSS /proc/1/status"}),
    )
    .await;
    ok(
        &url,
        &tool("process_signal"),
        json!({"id": id, "pid": flood, "signal": "kill"}),
    )
    .await;
    eprintln!(
        "flood: {} bytes written, a command answered in {answered_in:?}; agent {}; host RSS {host_before} -> {} KiB",
        read["process"]["output_bytes"],
        rss["stdout"].as_str().unwrap().trim(),
        wharf_integration_tests::processes::rss_kib(std::process::id())
    );
    let agent_kib: u64 = rss["stdout"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(agent_kib < 20 * 1024, "{rss}");

    // Hostile numbers: an unknown pid, a buffer past the cap, a container of no agent's.
    let reply = call_at(
        &url,
        &tool("process_output"),
        json!({"id": id, "pid": 999999}),
    )
    .await;
    assert_eq!(reply["code"], 4000, "{reply}");
    let reply = call_at(
        &url,
        &tool("process_start"),
        json!({"id": id, "command": "true", "buffer_bytes": u32::MAX}),
    )
    .await;
    assert_eq!(reply["code"], 4000, "{reply}");
    let reply = call_at(&url, &tool("process_list"), json!({"id": "0".repeat(64)})).await;
    assert_ne!(reply["code"], 0, "{reply}");
    remove_backend_containers(backend);
}

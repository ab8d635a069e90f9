//! The sandbox agent's rows: `run_command "true"` through the agent, through the engine's
//! exec (a second host with `sandbox_agent = false`) and `docker exec`, each in its own
//! block of the same run; the floor of one `sh -c true` spawned inside the container (also
//! the machine's spawn limit); the first line of a streamed command at a REST client; 100
//! sessions running `echo` in a loop at once, and their memory.

use super::{Cleanup, Client, EXECS, Figures, docker, docker_run, ms, p50};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wharf_integration_tests::{containers_labelled, docker_provider, start_with};

const SESSIONS: usize = 100;
/// Spawns in the in-container loop that measures the spawn floor.
const SPAWNS: u32 = 2000;
/// Streamed commands timed for the first-line row.
const STREAMS: usize = 20;

/// `run_command "true"` p50s: (through the agent, through the engine's exec on
/// `engine_path`, `docker exec` CLI), the in-container spawn floor and the first streamed
/// line, in ms.
async fn execs(
    client: &Client,
    engine_path: &Client,
    cleanup: &mut Cleanup,
) -> (f64, f64, f64, f64, f64, f64) {
    let session = client.create_session("bench-exec").await;
    let plain = engine_path.create_session("bench-exec-plain").await;
    cleanup.sessions.extend([session.clone(), plain.clone()]);
    let container = docker_run();
    cleanup.cli.push(container.clone());
    client.run(&session, "true").await;
    engine_path.run(&plain, "true").await;
    docker(&["exec", &container, "true"]);
    // Each path in its own block of the same run: a `docker exec` between two agent calls
    // (64 ms of the engine and a CLI process) would leave the next one a cold machine.
    let (mut agent, mut engine, mut cli) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..EXECS {
        let t = Instant::now();
        client.run(&session, "true").await;
        agent.push(ms(t.elapsed()));
    }
    for _ in 0..EXECS {
        let t = Instant::now();
        engine_path.run(&plain, "true").await;
        engine.push(ms(t.elapsed()));
    }
    for _ in 0..EXECS {
        let t = Instant::now();
        docker(&["exec", &container, "true"]);
        cli.push(ms(t.elapsed()));
    }
    let floor = spawn_floor_ms(client, &session).await;
    let first_line = first_streamed_line_ms(client, &session).await;
    let first_progress = first_mcp_progress_ms(client, "bench-exec").await;
    client.delete_all(&[session], cleanup).await;
    engine_path.delete_all(&[plain], cleanup).await;
    cleanup.remove_cli();
    (
        p50(&mut agent),
        p50(&mut engine),
        p50(&mut cli),
        floor,
        first_line,
        first_progress,
    )
}

/// How long the first line of a streamed command takes to reach a REST client (NDJSON):
/// `echo x; sleep 0.2`, p50 of [`STREAMS`] in one session, in ms.
async fn first_streamed_line_ms(client: &Client, session: &str) -> f64 {
    use futures::StreamExt;
    let mut samples = Vec::new();
    for i in 0..=STREAMS {
        let t = Instant::now();
        let response = client
            .http
            .post(format!("{}/v1/call", client.url))
            .header("accept", "application/x-ndjson")
            .json(&json!({"tool": "docker:run_command", "args": {"command": "echo x; sleep 0.2"}, "session_id": session}))
            .send()
            .await
            .expect("request reaches the host");
        let mut body = response.bytes_stream();
        let mut first = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.expect("the stream");
            if first.is_none() && chunk.windows(8).any(|w| w == b"\"output\"") {
                first = Some(ms(t.elapsed()));
            }
        }
        if i > 0 {
            samples.push(first.expect("an output line before the envelope"));
        }
    }
    p50(&mut samples)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// How long the first output of a streamed command takes to reach an MCP client: the
/// `notifications/progress` carrying `x` on the call's SSE stream, for the same
/// `echo x; sleep 0.2` in the same session (found by its key), p50 of [`STREAMS`], in ms.
async fn first_mcp_progress_ms(client: &Client, key: &str) -> f64 {
    use futures::StreamExt;
    let mcp =
        wharf_integration_tests::raw_mcp::RawMcpSession::open(&format!("{}/mcp", client.url)).await;
    let mut samples = Vec::new();
    for i in 0..=STREAMS {
        let body = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
            "name": "docker_run_command",
            "arguments": {"command": "echo x; sleep 0.2"},
            "_meta": {"progressToken": i, "wharf/session_key": key}}});
        let t = Instant::now();
        let response = mcp
            .request(&body)
            .send()
            .await
            .expect("the MCP endpoint answers");
        let mut stream = response.bytes_stream();
        let mut seen = Vec::new();
        let mut first = None;
        while let Some(chunk) = stream.next().await {
            seen.extend_from_slice(&chunk.expect("the SSE stream"));
            if first.is_none()
                && contains(&seen, b"notifications/progress")
                && contains(&seen, b"\"message\":\"x")
            {
                first = Some(ms(t.elapsed()));
            }
        }
        if i > 0 {
            samples.push(first.unwrap_or_else(|| {
                panic!(
                    "no progress with the output: {}",
                    String::from_utf8_lossy(&seen)
                )
            }));
        }
    }
    mcp.end().await;
    p50(&mut samples)
}

/// One `sh -c true` spawned inside the container, in ms: a loop of [`SPAWNS`] run as one
/// command and timed around it, so one round trip is spread over the whole loop.
async fn spawn_floor_ms(client: &Client, session: &str) -> f64 {
    let script = format!("i=0; while [ $i -lt {SPAWNS} ]; do sh -c true; i=$((i+1)); done");
    let t = Instant::now();
    client.run(session, &script).await;
    ms(t.elapsed()) / f64::from(SPAWNS)
}

/// Downloads of a 100 MB directory tree, p50 of three each in ms: as a tar stream from
/// `GET /v1/sessions/{id}/files` (through the agent) and from `docker cp ID:DIR -` (the
/// engine's archive API, through the CLI), both read to the end and dropped.
async fn tree_out(client: &Client, cleanup: &mut Cleanup) -> (f64, f64) {
    let session = client.create_session("bench-tree").await;
    cleanup.sessions.push(session.clone());
    client
        .run(
            &session,
            "mkdir -p tree/a && dd if=/dev/urandom of=tree/a/big bs=1048576 count=100 2>/dev/null",
        )
        .await;
    let container = containers_labelled("wharf.session", &session)
        .pop()
        .expect("the session's container");
    let (mut agent, mut cli) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t = Instant::now();
        let mut response = client
            .http
            .get(format!(
                "{}/v1/sessions/{session}/files?path=tree",
                client.url
            ))
            .send()
            .await
            .expect("the host answers");
        assert_eq!(response.status(), 200);
        let mut bytes = 0usize;
        while let Some(chunk) = response.chunk().await.expect("the tar stream") {
            bytes += chunk.len();
        }
        assert!(bytes > 100 << 20, "{bytes} bytes");
        agent.push(ms(t.elapsed()));
        let t = Instant::now();
        let out = std::process::Command::new("docker")
            .args(["cp", &format!("{container}:/work/tree"), "-"])
            .output()
            .expect("docker cp runs");
        assert!(out.status.success() && out.stdout.len() > 100 << 20);
        cli.push(ms(t.elapsed()));
    }
    client.delete_all(&[session], cleanup).await;
    (p50(&mut agent), p50(&mut cli))
}

/// 100 sessions, one looping task each: (commands/s, p50 ms, p99 ms, failures).
/// The sandbox agents' resident memory, in KiB: the PID 1 of each container of `sessions`,
/// read from `/proc` on this host (mean, max).
fn agents_rss_kib(sessions: &[String]) -> (f64, u64) {
    let ids: Vec<String> = sessions
        .iter()
        .flat_map(|s| containers_labelled("wharf.session", s))
        .collect();
    let mut args = vec!["inspect", "-f", "{{.State.Pid}}"];
    args.extend(ids.iter().map(String::as_str));
    let rss: Vec<u64> = docker(&args)
        .lines()
        .filter_map(|pid| pid.trim().parse::<u32>().ok())
        .map(super::super::rss_kib)
        .collect();
    let mean = rss.iter().sum::<u64>() as f64 / rss.len().max(1) as f64;
    (mean, rss.iter().copied().max().unwrap_or(0))
}

/// 100 sessions, one looping task each: (commands/s, p50 ms, p99 ms, failures), and the
/// memory row (agents idle, and what the host holds for them).
async fn concurrent(
    seconds: u32,
    cleanup: &mut Cleanup,
) -> ((f64, f64, f64, usize), (String, String)) {
    let mut cfg = docker_provider();
    cfg.grants.max_containers = SESSIONS as u32 + 8;
    // The pool size is the backend's concurrency limit (default 16): let all run at once.
    cfg.limits.pool_max = SESSIONS;
    let host = start_with(vec![("docker", cfg)], |s| s.max_body_bytes = 32 << 20).await;
    let client = Arc::new(Client::new(&host));
    // One sandbox first, so the host's own first-use allocations are not counted below.
    let first = client.create_session("bench-c-first").await;
    cleanup.sessions.push(first.clone());
    client.run(&first, "true").await;
    let host_before = super::super::rss_kib(std::process::id());
    let ids: Vec<String> = futures::future::join_all((0..SESSIONS).map(|i| {
        let client = client.clone();
        async move { client.create_session(&format!("bench-c{i}")).await }
    }))
    .await;
    cleanup.sessions.extend(ids.iter().cloned());
    for id in &ids {
        assert_eq!(client.run(id, "echo x").await["stdout"], "x\n");
    }
    let host_after = super::super::rss_kib(std::process::id());
    let (agent_mean, agent_max) = agents_rss_kib(&ids);
    let memory = (
        format!(
            "memory: sandbox agent RSS idle (mean and max of {SESSIONS}); host RSS growth for {SESSIONS} sandboxes"
        ),
        format!(
            "{:.2} MiB, {:.2} MiB; {:.1} MiB",
            agent_mean / 1024.0,
            agent_max as f64 / 1024.0,
            host_after.saturating_sub(host_before) as f64 / 1024.0
        ),
    );

    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds.into());
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (client, id) = (client.clone(), id.clone());
            tokio::spawn(async move {
                let (mut latencies, mut failures) = (Vec::new(), 0);
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let out = client.try_run(&id, "echo x").await;
                    latencies.push(ms(t.elapsed()));
                    if out.is_none_or(|o| o != "x\n") {
                        failures += 1;
                    }
                }
                (latencies, failures)
            })
        })
        .collect();
    let (mut latencies, mut failures) = (Vec::new(), 0);
    for task in tasks {
        let (l, f) = task.await.expect("a command loop panicked");
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    client.delete_all(&ids, cleanup).await;
    client.delete_all(&[first], cleanup).await;
    drop(host);
    (
        (
            latencies.len() as f64 / elapsed,
            super::super::percentile(&latencies, 0.5),
            super::super::percentile(&latencies, 0.99),
            failures,
        ),
        memory,
    )
}

/// The sandbox agent's rows: one command through it, through the engine's exec and the
/// CLI, the spawn floor, and 100 sessions at once.
pub(super) async fn rows(seconds: u32, cleanup: &mut Cleanup) -> Figures {
    let host = start_with(vec![("docker", docker_provider())], |s| {
        s.max_body_bytes = 32 << 20
    })
    .await;
    let client = Client::new(&host);
    let mut rows = Vec::new();
    let engine_host = start_with(vec![("docker", docker_provider())], |s| {
        s.max_body_bytes = 32 << 20;
        s.sandbox_agent = false;
    })
    .await;
    let (agent, engine, cli, floor, first_line, first_progress) =
        execs(&client, &Client::new(&engine_host), cleanup).await;
    drop(engine_host);
    let exec_ratio = agent / cli;
    rows.push((
        format!("run_command \"true\" round trip through the sandbox agent, p50 of {EXECS}"),
        format!("{agent:.2} ms"),
    ));
    rows.push((
        format!("run_command \"true\" through the engine's exec (no agent), p50 of {EXECS}"),
        format!("{engine:.2} ms"),
    ));
    rows.push((
        format!("`docker exec <id> true` (CLI), p50 of {EXECS}"),
        format!("{cli:.1} ms"),
    ));
    rows.push((
        format!("floor: one `sh -c true` spawned inside the container (loop of {SPAWNS})"),
        format!("{floor:.2} ms ({:.0} spawns/s)", 1e3 / floor),
    ));
    rows.push((
        format!("streamed `echo x; sleep 0.2`: first NDJSON output line at the REST client, p50 of {STREAMS}"),
        format!("{first_line:.2} ms"),
    ));
    rows.push((
        format!("the same: first `notifications/progress` with the output at an MCP client (raw streamable HTTP), p50 of {STREAMS}"),
        format!("{first_progress:.2} ms"),
    ));
    rows.push((
        "ratio agent / CLI, agent / engine exec, exec".into(),
        format!("{exec_ratio:.3}x, {:.2}x", agent / engine),
    ));
    let (tree_agent, tree_cli) = tree_out(&client, cleanup).await;
    rows.push((
        "a 100 MB directory out as a tar stream: GET /v1/sessions/{id}/files (agent) vs `docker cp ID:DIR -`, p50 of 3".into(),
        format!(
            "{tree_agent:.0} ms vs {tree_cli:.0} ms ({:.2}x)",
            tree_agent / tree_cli
        ),
    ));
    drop(host);

    let ((rate, p50, p99, failures), memory) = concurrent(seconds, cleanup).await;
    let spawn_limit = 1e3 / floor;
    rows.push((
        format!(
            "{SESSIONS} sessions (pool_max {SESSIONS}), run_command \"echo x\" loop, {seconds} s"
        ),
        format!(
            "{rate:.0} commands/s ({:.2}x the spawn limit), p50 {p50:.1} ms, p99 {p99:.1} ms, {failures} failures",
            rate / spawn_limit
        ),
    ));
    rows.push(memory);
    // Anything past 0 failures or 200 ms misses the target: folded into the p99 figure.
    let p99_or_failed = if failures > 0 { f64::INFINITY } else { p99 };
    Figures {
        rows,
        create_ratio: f64::NAN,
        exec_ratio,
        agent_exec: (agent, exec_ratio),
        concurrent: (rate, rate / spawn_limit, p99_or_failed),
        warm_hit: (f64::NAN, f64::NAN),
    }
}

//! The pause rows (issue 37), per runtime (runc, and gVisor when the engine has it):
//! `POST /v1/sessions/{id}/pause` and `/resume` of a docker-provider session against
//! `docker pause` / `docker unpause` of a CLI container of the same image and runtime, N=20
//! each, interleaved; and the first `run_command "true"` of a paused session (the resume
//! included) from the call's arrival, N=10.

use super::{Cleanup, Client, IDLE, IMAGE, docker, ms, p50};
use serde_json::{Value, json};
use std::time::Instant;
use wharf_integration_tests::{GVISOR_RUNTIME, docker_provider, gvisor_ready, start_with};

const ROUNDS: usize = 20;
const FIRST_CALLS: usize = 10;

/// The pause rows: runc's, then gVisor's when the engine has it.
pub async fn rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let mut rows = rows_for(None, cleanup).await;
    if gvisor_ready() {
        rows.extend(rows_for(Some(GVISOR_RUNTIME), cleanup).await);
    }
    rows.extend(snapshot_rows(cleanup).await);
    rows
}

const FORK: usize = 10;

/// A snapshot of a session with 50 MB changed in its work dir, then a fork of 10 from it
/// (runc), against ten `docker run -d` of the same image at once, in the same run.
async fn snapshot_rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let mut cfg = docker_provider();
    cfg.grants.max_containers = 2 * FORK as u32 + 4;
    let host = start_with(vec![("docker", cfg)], |_| {}).await;
    let client = Client::new(&host);
    let session = client.create_session("bench-snapshot").await;
    cleanup.sessions.push(session.clone());
    client
        .run(
            &session,
            "mkdir -p tree && for i in $(seq 1 50); do dd if=/dev/urandom of=tree/f$i bs=1M count=1 2>/dev/null; done",
        )
        .await;
    let t = Instant::now();
    let snapshot = client
        .send(
            client
                .http
                .post(format!("{}/v1/sessions/{session}/snapshots", client.url))
                .json(&json!({})),
        )
        .await;
    let snapshot_ms = ms(t.elapsed());
    let snapshot_id = snapshot["data"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let t = Instant::now();
    let fork = client
        .send(
            client
                .http
                .post(format!("{}/v1/sessions/{session}/fork", client.url))
                .json(&json!({"count": FORK})),
        )
        .await;
    let fork_ms = ms(t.elapsed());
    let forked: Vec<String> = fork["data"]["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    cleanup.sessions.extend(forked.iter().cloned());
    let t = Instant::now();
    let runs: Vec<_> = (0..FORK)
        .map(|_| {
            std::thread::spawn(|| {
                docker(&["run", "-d", "--network", "none", IMAGE, "sh", "-c", IDLE])
            })
        })
        .collect();
    for run in runs {
        if let Ok(id) = run.join() {
            cleanup.cli.push(id);
        }
    }
    let cli_ms = ms(t.elapsed());
    for id in forked.iter().chain(std::iter::once(&session)) {
        client.delete_session(id).await;
        cleanup.sessions.retain(|s| s != id);
    }
    for snapshot in [
        snapshot_id,
        fork["data"]["snapshot"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ] {
        let _ = client
            .http
            .delete(format!("{}/v1/snapshots/{snapshot}", client.url))
            .send()
            .await;
    }
    cleanup.remove_cli();
    vec![
        (
            "runc: snapshot of a session with 50 MB changed".into(),
            format!("{snapshot_ms:.0} ms"),
        ),
        (
            format!("runc: fork of {FORK} from that session (its snapshot included)"),
            format!("{fork_ms:.0} ms"),
        ),
        (
            format!("`docker run -d` x{FORK} at once (CLI)"),
            format!("{cli_ms:.0} ms"),
        ),
    ]
}

async fn rows_for(runtime: Option<&str>, cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let mut cfg = docker_provider();
    cfg.grants.isolation = vec!["container".into(), "gvisor".into()];
    let host = start_with(vec![("docker", cfg)], |s| {
        s.runtimes.insert("gvisor".into(), GVISOR_RUNTIME.into());
    })
    .await;
    let client = Client::new(&host);
    let config = match runtime {
        Some(_) => json!({"isolation": "gvisor"}),
        None => Value::Null,
    };
    let session = client.create_session_with("bench-pause", &config).await;
    cleanup.sessions.push(session.clone());
    let mut run = vec!["run", "-d", "--network", "none"];
    if let Some(runtime) = runtime {
        run.extend(["--runtime", runtime]);
    }
    run.extend([IMAGE, "sh", "-c", IDLE]);
    let cli = docker(&run);
    cleanup.cli.push(cli.clone());
    let on = runtime.map_or("runc".to_string(), |r| format!("gVisor ({r})"));
    let post = |what: &'static str| {
        let (client, session) = (&client, session.clone());
        async move {
            let t = Instant::now();
            client
                .send(
                    client
                        .http
                        .post(format!("{}/v1/sessions/{session}/{what}", client.url))
                        .json(&json!({})),
                )
                .await;
            ms(t.elapsed())
        }
    };
    let timed_cli = |what: &str| {
        let t = Instant::now();
        docker(&[what, &cli]);
        ms(t.elapsed())
    };
    let (mut pause, mut resume, mut cli_pause, mut cli_resume) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let (p, r) = (post("pause").await, post("resume").await);
        let (cp, cr) = (timed_cli("pause"), timed_cli("unpause"));
        // The first round is the untimed warm-up.
        if round > 0 {
            pause.push(p);
            resume.push(r);
            cli_pause.push(cp);
            cli_resume.push(cr);
        }
    }
    let mut first = Vec::new();
    for _ in 0..FIRST_CALLS {
        post("pause").await;
        let t = Instant::now();
        client.run(&session, "true").await;
        first.push(ms(t.elapsed()));
    }
    client.delete_session(&session).await;
    cleanup.sessions.retain(|s| *s != session);
    cleanup.remove_cli();
    let (p, r) = (p50(&mut pause), p50(&mut resume));
    let (cp, cr) = (p50(&mut cli_pause), p50(&mut cli_resume));
    vec![
        (
            format!("{on}: session pause, p50 of {ROUNDS}"),
            format!("{p:.1} ms"),
        ),
        (
            format!("{on}: `docker pause` (CLI), p50 of {ROUNDS}"),
            format!("{cp:.1} ms"),
        ),
        (
            format!("{on}: ratio Wharf / CLI, pause"),
            format!("{:.2}x", p / cp),
        ),
        (
            format!("{on}: session resume, p50 of {ROUNDS}"),
            format!("{r:.1} ms"),
        ),
        (
            format!("{on}: `docker unpause` (CLI), p50 of {ROUNDS}"),
            format!("{cr:.1} ms"),
        ),
        (
            format!("{on}: ratio Wharf / CLI, resume"),
            format!("{:.2}x", r / cr),
        ),
        (
            format!(
                "{on}: first `run_command \"true\"` of a paused session (resume included), p50 of {FIRST_CALLS}"
            ),
            format!("{:.1} ms", p50(&mut first)),
        ),
    ]
}

//! The pause rows (issue 37): `POST /v1/sessions/{id}/pause` and `/resume` of a
//! docker-provider session against `docker pause` / `docker unpause` of a CLI container of
//! the same image, N=20 each, interleaved; and the first `run_command "true"` of a paused
//! session (the resume included) from the call's arrival, N=10.

use super::{Cleanup, Client, docker, docker_run, ms, p50};
use serde_json::json;
use std::time::Instant;
use wharf_integration_tests::{docker_provider, start_with};

const ROUNDS: usize = 20;
const FIRST_CALLS: usize = 10;

/// The pause rows.
pub async fn rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let host = start_with(vec![("docker", docker_provider())], |_| {}).await;
    let client = Client::new(&host);
    let session = client.create_session("bench-pause").await;
    cleanup.sessions.push(session.clone());
    let cli = docker_run();
    cleanup.cli.push(cli.clone());
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
            format!("session pause, p50 of {ROUNDS}"),
            format!("{p:.1} ms"),
        ),
        (
            format!("`docker pause` (CLI), p50 of {ROUNDS}"),
            format!("{cp:.1} ms"),
        ),
        ("ratio Wharf / CLI, pause".into(), format!("{:.2}x", p / cp)),
        (
            format!("session resume, p50 of {ROUNDS}"),
            format!("{r:.1} ms"),
        ),
        (
            format!("`docker unpause` (CLI), p50 of {ROUNDS}"),
            format!("{cr:.1} ms"),
        ),
        (
            "ratio Wharf / CLI, resume".into(),
            format!("{:.2}x", r / cr),
        ),
        (
            format!(
                "first `run_command \"true\"` of a paused session (resume included), p50 of {FIRST_CALLS}"
            ),
            format!("{:.1} ms", p50(&mut first)),
        ),
    ]
}

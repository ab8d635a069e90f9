//! The preview rows: one small GET (busybox `httpd` in the sandbox) through the preview
//! listener — the host's proxy and the sandbox agent's port relay — against the same server
//! reached directly at the container's bridge address, with the same keep-alive client, in
//! alternating blocks of the same run: the ratio is the median of the blocks' ratios, so
//! the machine's drift over the run weighs on both sides alike.

use super::{Cleanup, Client, ms, p50};
use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::{docker_provider, start_with};

/// Requests timed per path in one block.
const REQUESTS: usize = 200;
/// Blocks per path, alternating.
const ROUNDS: usize = 7;

async fn tool(client: &Client, session: &str, tool: &str, args: serde_json::Value) {
    client
        .send(
            client.http.post(format!("{}/v1/call", client.url)).json(
                &json!({"tool": format!("docker:{tool}"), "args": args, "session_id": session}),
            ),
        )
        .await;
}

/// Requests/s of `REQUESTS` sequential GETs of `url`; each request's ms go to `samples`.
async fn timed(http: &reqwest::Client, url: &str, samples: &mut Vec<f64>) -> f64 {
    let started = Instant::now();
    for _ in 0..REQUESTS {
        let t = Instant::now();
        let body = http
            .get(url)
            .send()
            .await
            .expect("the server answers")
            .bytes()
            .await
            .expect("a body");
        assert_eq!(&body[..], b"hello-preview\n");
        samples.push(ms(t.elapsed()));
    }
    REQUESTS as f64 / started.elapsed().as_secs_f64()
}

/// The preview rows.
pub(super) async fn rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let host = start_with(vec![("docker", docker_provider())], |s| {
        s.preview_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let client = Client::new(&host);
    let created = client
        .create_session_full(
            "bench-preview",
            &json!({"network": {"block_network": false}, "expose_ports": [8080]}),
        )
        .await;
    let session = created["data"]["id"]
        .as_str()
        .expect("a session")
        .to_string();
    let container = created["data"]["data"]["sandbox"]
        .as_str()
        .expect("a container")
        .to_string();
    cleanup.sessions.push(session.clone());
    tool(
        &client,
        &session,
        "write_file",
        json!({"path": "/work/www/index.html", "content": "hello-preview\n"}),
    )
    .await;
    tool(
        &client,
        &session,
        "start_process",
        json!({"command": "httpd -f -p 8080 -h /work/www"}),
    )
    .await;
    let ip = super::docker(&[
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        &container,
    ]);
    let preview = format!(
        "http://{}/{session}/8080/index.html",
        host.wharf.preview_addr().expect("a preview listener")
    );
    let direct = format!("http://{ip}:8080/index.html");
    let http = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(30))
        .build()
        .expect("a client");
    // The preview by the session's token (the test host is open: no token needed).
    let deadline = Instant::now() + Duration::from_secs(10);
    while http.get(&direct).send().await.is_err() {
        assert!(Instant::now() < deadline, "httpd never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for url in [&direct, &preview] {
        for _ in 0..20 {
            let _ = http
                .get(url.as_str())
                .send()
                .await
                .and_then(|r| r.error_for_status());
        }
    }
    let (mut direct_ms, mut preview_ms) = (Vec::new(), Vec::new());
    let (mut direct_rates, mut preview_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let direct_rate = timed(&http, &direct, &mut direct_ms).await;
        let preview_rate = timed(&http, &preview, &mut preview_ms).await;
        direct_rates.push(direct_rate);
        preview_rates.push(preview_rate);
        ratios.push(preview_rate / direct_rate);
    }
    client.delete_all(&[session], cleanup).await;
    drop(host);
    let lowest = ratios.iter().copied().fold(f64::MAX, f64::min);
    let highest = ratios.iter().copied().fold(0.0, f64::max);
    vec![
        (
            format!(
                "preview: GET of a 14-byte page through the preview listener, {ROUNDS} blocks of {REQUESTS}, median block"
            ),
            format!(
                "{:.0} requests/s, p50 {:.2} ms",
                p50(&mut preview_rates),
                p50(&mut preview_ms)
            ),
        ),
        (
            "preview: the same GET at the container's bridge address, blocks alternating".into(),
            format!(
                "{:.0} requests/s, p50 {:.2} ms",
                p50(&mut direct_rates),
                p50(&mut direct_ms)
            ),
        ),
        (
            "ratio preview / direct, requests/s (median of the blocks' ratios; lowest–highest)"
                .into(),
            format!("{:.2}x ({lowest:.2}x–{highest:.2}x)", p50(&mut ratios)),
        ),
    ]
}

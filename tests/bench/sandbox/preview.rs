//! The preview rows: one small GET (busybox `httpd` in the sandbox) through the preview
//! listener — the host's proxy and the sandbox agent's port relay — against the same server
//! reached directly at the container's bridge address, with the same keep-alive client, in
//! blocks of the same run.

use super::{Cleanup, Client, ms, p50};
use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::{docker_provider, start_with};

/// Requests timed per path.
const REQUESTS: usize = 500;

async fn tool(client: &Client, session: &str, tool: &str, args: serde_json::Value) {
    client
        .send(
            client.http.post(format!("{}/v1/call", client.url)).json(
                &json!({"tool": format!("docker:{tool}"), "args": args, "session_id": session}),
            ),
        )
        .await;
}

/// (requests/s, p50 ms) of `REQUESTS` sequential GETs of `url`.
async fn timed(http: &reqwest::Client, url: &str) -> (f64, f64) {
    for _ in 0..20 {
        let _ = http
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status());
    }
    let mut samples = Vec::with_capacity(REQUESTS);
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
    let rate = REQUESTS as f64 / started.elapsed().as_secs_f64();
    (rate, p50(&mut samples))
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
    let (direct_rate, direct_p50) = timed(&http, &direct).await;
    let (preview_rate, preview_p50) = timed(&http, &preview).await;
    client.delete_all(&[session], cleanup).await;
    drop(host);
    vec![
        (
            format!(
                "preview: GET of a 14-byte page through the preview listener, {REQUESTS} in a row"
            ),
            format!("{preview_rate:.0} requests/s, p50 {preview_p50:.2} ms"),
        ),
        (
            format!("preview: the same GET at the container's bridge address, {REQUESTS} in a row"),
            format!("{direct_rate:.0} requests/s, p50 {direct_p50:.2} ms"),
        ),
        (
            "ratio preview / direct, requests/s".into(),
            format!("{:.2}x", preview_rate / direct_rate),
        ),
    ]
}

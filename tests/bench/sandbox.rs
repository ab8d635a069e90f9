//! The sandbox figures: the Wasm docker provider behind an in-process host against the
//! Docker CLI on the same engine, in the same run.
//!
//! - session create (a container created and started through the provider) vs `docker run -d`
//!   of the same image, N=20 sequential each, interleaved so both see the same machine load;
//! - `run_command "true"` over `/v1/call` vs `docker exec <id> true`, 50 sequential each,
//!   interleaved;
//! - 32 sessions, each with one task calling `run_command "echo x"` in a loop for
//!   `BENCH_SECONDS`.
//!
//! - the warm pool: hit vs `docker run -d`, 100 sessions back to back with and without a
//!   pool, 100 concurrent sessions (see `sandbox/warm.rs`).
//!
//! One untimed warm-up of each operation precedes the timed ones. Everything created here is
//! removed at the end, and also when the run panics (see `Cleanup`).

mod warm;

use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wharf_integration_tests::{TestHost, containers_labelled, docker_provider, start_with};

const IMAGE: &str = "wharf-sandbox:test";
const IDLE: &str = r#"trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done"#;
const CREATES: usize = 20;
const EXECS: usize = 50;
const SESSIONS: usize = 32;

/// The sandbox rows, and the two ratios the targets line checks.
pub struct Figures {
    pub rows: Vec<(String, String)>,
    pub create_ratio: f64,
    pub exec_ratio: f64,
    /// Warm-pool hit create p50 (ms) and its ratio to `docker run -d`.
    pub warm_hit: (f64, f64),
}

/// Removes whatever is still tracked: CLI containers by id, sessions by their container label
/// (a session deleted over REST is untracked first, so this only matters after a panic).
#[derive(Default)]
struct Cleanup {
    cli: Vec<String>,
    sessions: Vec<String>,
}

impl Cleanup {
    fn remove_cli(&mut self) {
        if self.cli.is_empty() {
            return;
        }
        let status = Command::new("docker")
            .args(["rm", "-f"])
            .args(&self.cli)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if status.is_ok_and(|s| s.success()) {
            self.cli.clear();
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.remove_cli();
        let leftovers: Vec<String> = self
            .sessions
            .iter()
            .flat_map(|s| containers_labelled("wharf.session", s))
            .collect();
        if !leftovers.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f"])
                .args(&leftovers)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A keep-alive client against one host (the test helpers open a connection per request).
struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    fn new(host: &TestHost) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: host.url.clone(),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Value {
        let response = request.send().await.expect("request reaches the host");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON reply");
        assert!(
            status.is_success() && body["code"] == 0,
            "HTTP {status}: {body}"
        );
        body
    }

    async fn create_session(&self, key: &str) -> String {
        let body = self
            .send(
                self.http
                    .post(format!("{}/v1/sessions", self.url))
                    .json(&json!({"backend": "docker", "key": key})),
            )
            .await;
        body["data"]["id"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    async fn delete_session(&self, id: &str) {
        self.send(self.http.delete(format!("{}/v1/sessions/{id}", self.url)))
            .await;
    }

    async fn run(&self, session: &str, command: &str) -> Value {
        let body = self
            .send(self.http.post(format!("{}/v1/call", self.url)).json(
                &json!({"tool": "docker:run_command", "args": {"command": command}, "session_id": session}),
            ))
            .await;
        let result = body["data"]["result"].clone();
        assert_eq!(result["exit_code"], 0, "{body}");
        result
    }

    /// `run_command`'s stdout, or `None` on any failure (counted by the caller).
    async fn try_run(&self, session: &str, command: &str) -> Option<Value> {
        let response = self
            .http
            .post(format!("{}/v1/call", self.url))
            .json(&json!({"tool": "docker:run_command", "args": {"command": command}, "session_id": session}))
            .send()
            .await
            .ok()?;
        let body: Value = response.json().await.ok()?;
        (body["code"] == 0 && body["data"]["result"]["exit_code"] == 0)
            .then(|| body["data"]["result"]["stdout"].clone())
    }

    async fn delete_all(&self, ids: &[String], cleanup: &mut Cleanup) {
        for id in ids {
            self.delete_session(id).await;
            cleanup.sessions.retain(|s| s != id);
        }
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("docker CLI runs");
    assert!(out.status.success(), "docker {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn docker_run() -> String {
    docker(&["run", "-d", "--network", "none", IMAGE, "sh", "-c", IDLE])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p50(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    super::percentile(samples, 0.5)
}

/// Session create vs `docker run -d`: (Wharf p50 ms, CLI p50 ms). Each pair is removed
/// (untimed) before the next, so both sides always start from the same container count and
/// the default `grants.max_containers` (16) is never reached.
async fn creates(client: &Client, cleanup: &mut Cleanup) -> (f64, f64) {
    let (mut wharf, mut cli) = (Vec::new(), Vec::new());
    for i in 0..=CREATES {
        let t = Instant::now();
        let session = client.create_session(&format!("bench-{i}")).await;
        let w = ms(t.elapsed());
        cleanup.sessions.push(session.clone());

        let t = Instant::now();
        let container = docker_run();
        let c = ms(t.elapsed());
        cleanup.cli.push(container);

        // Round 0 is the untimed warm-up.
        if i > 0 {
            wharf.push(w);
            cli.push(c);
        }
        client.delete_all(&[session], cleanup).await;
        cleanup.remove_cli();
    }
    (p50(&mut wharf), p50(&mut cli))
}

/// `run_command "true"` vs `docker exec <id> true`: (Wharf p50 ms, CLI p50 ms).
async fn execs(client: &Client, cleanup: &mut Cleanup) -> (f64, f64) {
    let session = client.create_session("bench-exec").await;
    cleanup.sessions.push(session.clone());
    let container = docker_run();
    cleanup.cli.push(container.clone());
    client.run(&session, "true").await;
    docker(&["exec", &container, "true"]);
    let (mut wharf, mut cli) = (Vec::new(), Vec::new());
    for _ in 0..EXECS {
        let t = Instant::now();
        client.run(&session, "true").await;
        wharf.push(ms(t.elapsed()));

        let t = Instant::now();
        docker(&["exec", &container, "true"]);
        cli.push(ms(t.elapsed()));
    }
    client.delete_all(&[session], cleanup).await;
    cleanup.remove_cli();
    (p50(&mut wharf), p50(&mut cli))
}

/// 32 sessions, one looping task each: (commands/s, p50 ms, p99 ms).
async fn concurrent(seconds: u32, cleanup: &mut Cleanup) -> (f64, f64, f64) {
    let mut cfg = docker_provider();
    cfg.grants.max_containers = 40;
    // The pool size is the backend's concurrency limit (default 16): let all 32 run at once.
    cfg.limits.pool_max = SESSIONS;
    let host = start_with(vec![("docker", cfg)], |s| s.max_body_bytes = 32 << 20).await;
    let client = Arc::new(Client::new(&host));
    let ids: Vec<String> = futures::future::join_all((0..SESSIONS).map(|i| {
        let client = client.clone();
        async move { client.create_session(&format!("bench-c{i}")).await }
    }))
    .await;
    cleanup.sessions.extend(ids.iter().cloned());
    for id in &ids {
        assert_eq!(client.run(id, "echo x").await["stdout"], "x\n");
    }

    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds.into());
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (client, id) = (client.clone(), id.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let out = client.run(&id, "echo x").await;
                    latencies.push(ms(t.elapsed()));
                    assert_eq!(out["stdout"], "x\n");
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a command loop panicked"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    client.delete_all(&ids, cleanup).await;
    drop(host);
    (
        latencies.len() as f64 / elapsed,
        super::percentile(&latencies, 0.5),
        super::percentile(&latencies, 0.99),
    )
}

/// Runs the sandbox part (needs Docker and the test image; the caller checks).
pub async fn run(seconds: u32) -> Figures {
    let mut cleanup = Cleanup::default();
    let host = start_with(vec![("docker", docker_provider())], |s| {
        s.max_body_bytes = 32 << 20
    })
    .await;
    let client = Client::new(&host);
    let mut rows = Vec::new();

    let (w, c) = creates(&client, &mut cleanup).await;
    let create_ratio = w / c;
    rows.push((
        format!("session create + container start, p50 of {CREATES}"),
        format!("{w:.1} ms"),
    ));
    rows.push((
        format!("`docker run -d` (CLI), p50 of {CREATES}"),
        format!("{c:.1} ms"),
    ));
    rows.push((
        "ratio Wharf / CLI, create".into(),
        format!("{create_ratio:.2}x"),
    ));

    let (w, c) = execs(&client, &mut cleanup).await;
    let exec_ratio = w / c;
    rows.push((
        format!("run_command \"true\" round trip, p50 of {EXECS}"),
        format!("{w:.1} ms"),
    ));
    rows.push((
        format!("`docker exec <id> true` (CLI), p50 of {EXECS}"),
        format!("{c:.1} ms"),
    ));
    rows.push((
        "ratio Wharf / CLI, exec".into(),
        format!("{exec_ratio:.2}x"),
    ));
    drop(host);

    let (rate, p50, p99) = concurrent(seconds, &mut cleanup).await;
    rows.push((
        format!(
            "{SESSIONS} sessions (pool_max {SESSIONS}), run_command \"echo x\" loop, {seconds} s"
        ),
        format!("{rate:.0} commands/s, p50 {p50:.1} ms, p99 {p99:.1} ms"),
    ));
    let warm = warm::run(seconds, &mut cleanup).await;
    rows.extend(warm.rows);
    Figures {
        rows,
        create_ratio,
        exec_ratio,
        warm_hit: (warm.hit_p50_ms, warm.hit_ratio),
    }
}

/// Only the warm-pool rows (`WHARF_BENCH_ONLY=warm`).
pub async fn run_warm(seconds: u32) -> Figures {
    let mut cleanup = Cleanup::default();
    let warm = warm::run(seconds, &mut cleanup).await;
    Figures {
        rows: warm.rows,
        create_ratio: f64::NAN,
        exec_ratio: f64::NAN,
        warm_hit: (warm.hit_p50_ms, warm.hit_ratio),
    }
}

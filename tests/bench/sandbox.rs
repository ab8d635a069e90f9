//! The sandbox figures: the Wasm docker provider behind an in-process host against the
//! Docker CLI on the same engine, in the same run.
//!
//! - session create (a container created and started through the provider) vs `docker run -d`
//!   of the same image, N=20 sequential each, interleaved so both see the same machine load;
//! - the sandbox agent: `run_command "true"` through it, through the engine's exec and
//!   `docker exec`, the in-container spawn floor, the first streamed line, 100 sessions at
//!   once (see `sandbox/agent.rs`);
//!
//! - the warm pool: hit vs `docker run -d`, 100 sessions back to back with and without a
//!   pool, 100 concurrent sessions (see `sandbox/warm.rs`);
//! - isolation: gVisor create vs `docker run -d --runtime=runsc`, `run_command` under gVisor
//!   beside runc, a gVisor warm-pool hit (see `sandbox/isolation.rs`; only with gVisor);
//! - previews: a small GET through the preview listener vs the container's own address
//!   (see `sandbox/preview.rs`);
//! - terminals: a keystroke's echo over the terminal's WebSocket beside a `run_command`
//!   (see `sandbox/terminal.rs`);
//! - egress: a 100 MB download and small requests through the egress proxy vs an open
//!   network (see `sandbox/egress.rs`);
//! - pause and resume vs `docker pause` / `unpause`, and a paused session's first command
//!   (see `sandbox/pause.rs`).
//!
//! One untimed warm-up of each operation precedes the timed ones. Everything created here is
//! removed at the end, and also when the run panics (see `Cleanup`).

mod agent;
mod egress;
mod isolation;
mod pause;
mod preview;
mod terminal;
mod warm;

use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wharf_integration_tests::{TestHost, containers_labelled, docker_provider, start_with};

const IMAGE: &str = "wharf-sandbox:test";
const IDLE: &str = r#"trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done"#;
const CREATES: usize = 20;
const EXECS: usize = 50;

/// The sandbox rows, and the two ratios the targets line checks.
pub struct Figures {
    pub rows: Vec<(String, String)>,
    pub create_ratio: f64,
    pub exec_ratio: f64,
    /// `run_command "true"` through the agent: p50 (ms) and its ratio to `docker exec`.
    pub agent_exec: (f64, f64),
    /// 100 sessions' commands/s, its ratio to the spawn limit, and p99 (ms).
    pub concurrent: (f64, f64, f64),
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
        self.create_session_with(key, &Value::Null).await
    }

    async fn create_session_with(&self, key: &str, config: &Value) -> String {
        self.create_session_full(key, config).await["data"]["id"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    /// The whole reply of a session create with `config`.
    async fn create_session_full(&self, key: &str, config: &Value) -> Value {
        self.send(
            self.http
                .post(format!("{}/v1/sessions", self.url))
                .json(&json!({"backend": "docker", "key": key, "config": config})),
        )
        .await
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
    creates_like(client, cleanup, &Value::Null, &[]).await
}

/// [`creates`] of sessions with `config`, against `docker run -d` with `cli_args` first.
async fn creates_like(
    client: &Client,
    cleanup: &mut Cleanup,
    config: &Value,
    cli_args: &[&str],
) -> (f64, f64) {
    let (mut wharf, mut cli) = (Vec::new(), Vec::new());
    for i in 0..=CREATES {
        let t = Instant::now();
        let session = client
            .create_session_with(&format!("bench-{i}"), config)
            .await;
        let w = ms(t.elapsed());
        cleanup.sessions.push(session.clone());

        let t = Instant::now();
        let mut args = vec!["run", "-d"];
        args.extend_from_slice(cli_args);
        args.extend(["--network", "none", IMAGE, "sh", "-c", IDLE]);
        let container = docker(&args);
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

    drop(host);
    let agent = agent::rows(seconds, &mut cleanup).await;
    rows.extend(agent.rows);
    let warm = warm::run(seconds, &mut cleanup).await;
    rows.extend(warm.rows);
    if wharf_integration_tests::gvisor_ready() {
        rows.extend(isolation::rows(&mut cleanup).await.rows);
    }
    rows.extend(preview::rows(&mut cleanup).await);
    rows.extend(egress::rows(&mut cleanup).await);
    rows.extend(pause::rows(&mut cleanup).await);
    Figures {
        rows,
        create_ratio,
        exec_ratio: agent.exec_ratio,
        agent_exec: agent.agent_exec,
        concurrent: agent.concurrent,
        warm_hit: (warm.hit_p50_ms, warm.hit_ratio),
    }
}

/// Only the sandbox agent's rows (`WHARF_BENCH_ONLY=agent`).
pub async fn run_agent(seconds: u32) -> Figures {
    let mut cleanup = Cleanup::default();
    agent::rows(seconds, &mut cleanup).await
}

/// Only the preview rows (`WHARF_BENCH_ONLY=preview`).
pub async fn run_preview() -> Vec<(String, String)> {
    let mut cleanup = Cleanup::default();
    preview::rows(&mut cleanup).await
}

/// Only the terminal rows (`WHARF_BENCH_ONLY=terminal`).
pub async fn run_terminal() -> Vec<(String, String)> {
    let mut cleanup = Cleanup::default();
    terminal::rows(&mut cleanup).await
}

/// Only the egress rows (`WHARF_BENCH_ONLY=egress`).
pub async fn run_egress() -> Vec<(String, String)> {
    let mut cleanup = Cleanup::default();
    egress::rows(&mut cleanup).await
}

/// Only the pause rows (`WHARF_BENCH_ONLY=pause`).
pub async fn run_pause() -> Vec<(String, String)> {
    let mut cleanup = Cleanup::default();
    pause::rows(&mut cleanup).await
}

/// Only the isolation rows (`WHARF_BENCH_ONLY=isolation`).
pub async fn run_isolation() -> Figures {
    let mut cleanup = Cleanup::default();
    isolation::rows(&mut cleanup).await
}

/// Only the warm-pool rows (`WHARF_BENCH_ONLY=warm`).
pub async fn run_warm(seconds: u32) -> Figures {
    let mut cleanup = Cleanup::default();
    let warm = warm::run(seconds, &mut cleanup).await;
    Figures {
        rows: warm.rows,
        create_ratio: f64::NAN,
        exec_ratio: f64::NAN,
        agent_exec: (f64::NAN, f64::NAN),
        concurrent: (f64::NAN, f64::NAN, f64::NAN),
        warm_hit: (warm.hit_p50_ms, warm.hit_ratio),
    }
}

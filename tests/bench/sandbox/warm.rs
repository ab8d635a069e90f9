//! The warm-pool figures (ARCHITECTURE.md, "Warm sandboxes"), in the same run as the rest
//! of the sandbox part:
//!
//! - session create with a warm-pool hit vs `docker run -d`, N=20 each, interleaved (the
//!   pool is refilled, untimed, before each round so every timed create is a hit);
//! - 100 sessions created back to back with a pool of 16, and the same without a pool;
//! - 100 sessions, each with one task calling `run_command "echo x"` in a loop for
//!   `BENCH_SECONDS`: commands/s, p50, p99 and failures (counted, not asserted).

use super::{Cleanup, Client, IMAGE, docker_run, ms, p50};
use serde_json::json;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use wharf::config::{BackendConfig, WarmPoolConfig};
use wharf_integration_tests::{TestHost, docker_provider, start_with};

const HITS: usize = 20;
const BACK_TO_BACK: usize = 100;
const POOL: u32 = 16;
const SCALE: usize = 100;

/// The warm rows, and the hit / `docker run -d` ratio the targets line checks.
pub struct WarmFigures {
    pub rows: Vec<(String, String)>,
    pub hit_p50_ms: f64,
    pub hit_ratio: f64,
}

fn config(pool: u32) -> BackendConfig {
    let mut cfg = docker_provider();
    cfg.grants.max_containers = (BACK_TO_BACK + SCALE) as u32 + 2 * pool;
    cfg.grants.images = vec![IMAGE.into()];
    cfg.limits.pool_max = 32;
    if pool > 0 {
        cfg.warm_pool = Some(WarmPoolConfig {
            size: pool,
            ..WarmPoolConfig::default()
        });
    }
    cfg
}

async fn host(pool: u32) -> TestHost {
    start_with(vec![("docker", config(pool))], |s| {
        s.max_body_bytes = 32 << 20
    })
    .await
}

/// Running pool containers of this host's `docker` backend.
fn pooled_running(host: &TestHost) -> usize {
    let out = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            "label=wharf.pool=docker",
            "--filter",
        ])
        .arg(format!("label=wharf.node={}", host.wharf.node_id()))
        .output()
        .expect("docker CLI runs");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

async fn wait_filled(host: &TestHost, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while pooled_running(host) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pool-hit create vs `docker run -d`: (hit p50 ms, CLI p50 ms).
async fn hits(cleanup: &mut Cleanup) -> (f64, f64) {
    let host = host(4).await;
    let client = Client::new(&host);
    let (mut wharf, mut cli) = (Vec::new(), Vec::new());
    for i in 0..=HITS {
        wait_filled(&host, 4).await;
        let t = Instant::now();
        let session = client.create_session(&format!("warm-{i}")).await;
        let w = ms(t.elapsed());
        cleanup.sessions.push(session.clone());

        let t = Instant::now();
        let container = docker_run();
        let c = ms(t.elapsed());
        cleanup.cli.push(container);
        if i > 0 {
            wharf.push(w);
            cli.push(c);
        }
        client.delete_all(&[session], cleanup).await;
        cleanup.remove_cli();
    }
    host.wharf.unload_backend("docker").await.ok();
    (p50(&mut wharf), p50(&mut cli))
}

/// 100 sessions created one after the other: (total s, p50 ms, p99 ms).
async fn back_to_back(pool: u32, cleanup: &mut Cleanup) -> (f64, f64, f64) {
    let host = host(pool).await;
    let client = Client::new(&host);
    wait_filled(&host, pool as usize).await;
    let mut latencies = Vec::new();
    let mut ids = Vec::new();
    let started = Instant::now();
    for i in 0..BACK_TO_BACK {
        let t = Instant::now();
        let id = client.create_session(&format!("b2b-{i}")).await;
        latencies.push(ms(t.elapsed()));
        cleanup.sessions.push(id.clone());
        ids.push(id);
    }
    let total = started.elapsed().as_secs_f64();
    client.delete_all(&ids, cleanup).await;
    host.wharf.unload_backend("docker").await.ok();
    latencies.sort_by(f64::total_cmp);
    (
        total,
        super::super::percentile(&latencies, 0.5),
        super::super::percentile(&latencies, 0.99),
    )
}

/// 100 sessions, one `echo` loop each: (commands/s, p50 ms, p99 ms, failures, seconds the
/// first command of every session took together).
async fn scale(seconds: u32, cleanup: &mut Cleanup) -> (f64, f64, f64, usize, f64) {
    let host = host(POOL).await;
    let client = Arc::new(Client::new(&host));
    let mut ids = Vec::new();
    for chunk in (0..SCALE).collect::<Vec<_>>().chunks(16) {
        let made = futures::future::join_all(chunk.iter().map(|i| {
            let client = client.clone();
            async move { client.create_session(&format!("scale-{i}")).await }
        }))
        .await;
        ids.extend(made);
    }
    cleanup.sessions.extend(ids.iter().cloned());
    // One untimed command per session first: it starts the container's resident shell (an
    // exec create + start each, which the engine serializes: ~4 s for 100 here), as the
    // 32-session row's warm-up does; the loop then measures commands, not shell starts.
    let first = Instant::now();
    let warmed = futures::future::join_all(ids.iter().map(|id| client.try_run(id, "true"))).await;
    let first_round = first.elapsed().as_secs_f64();
    let failures = Arc::new(AtomicUsize::new(
        warmed.iter().filter(|r| r.is_none()).count(),
    ));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds.into());
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (client, id, failures) = (client.clone(), id.clone(), failures.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let ok = client.try_run(&id, "echo x").await == Some(json!("x\n"));
                    latencies.push(ms(t.elapsed()));
                    if !ok {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
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
    host.wharf.unload_backend("docker").await.ok();
    (
        latencies.len() as f64 / elapsed,
        super::super::percentile(&latencies, 0.5),
        super::super::percentile(&latencies, 0.99),
        failures.load(Ordering::Relaxed),
        first_round,
    )
}

/// Runs the warm-pool part (needs Docker and the test image; the caller checks).
pub async fn run(seconds: u32, cleanup: &mut Cleanup) -> WarmFigures {
    let mut rows = Vec::new();
    let (w, c) = hits(cleanup).await;
    rows.push((
        format!("session create, warm-pool hit, p50 of {HITS}"),
        format!("{w:.1} ms"),
    ));
    rows.push((
        format!("`docker run -d` (CLI) beside it, p50 of {HITS}"),
        format!("{c:.1} ms"),
    ));
    rows.push((
        "ratio warm hit / CLI, create".into(),
        format!("{:.3}x", w / c),
    ));
    for pool in [POOL, 0] {
        let (total, p50, p99) = back_to_back(pool, cleanup).await;
        let with = if pool > 0 {
            format!("warm pool {pool}")
        } else {
            "no pool".to_string()
        };
        rows.push((
            format!("{BACK_TO_BACK} sessions created back to back, {with}"),
            format!("{total:.1} s, p50 {p50:.1} ms, p99 {p99:.1} ms"),
        ));
    }
    let (rate, p50, p99, failures, first_round) = scale(seconds, cleanup).await;
    rows.push((
        format!("{SCALE} sessions, first command in each at once"),
        format!("{first_round:.1} s"),
    ));
    rows.push((
        format!("{SCALE} sessions (pool_max 32), run_command \"echo x\" loop, {seconds} s"),
        format!("{rate:.0} commands/s, p50 {p50:.1} ms, p99 {p99:.1} ms, {failures} failures"),
    ));
    WarmFigures {
        rows,
        hit_p50_ms: w,
        hit_ratio: w / c,
    }
}

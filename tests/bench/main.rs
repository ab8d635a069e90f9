//! The benchmark: one table of figures and ratios, on this machine, in one run.
//!
//! - trivial tool calls over REST (`echo:ping`) at concurrency 1 and 32 for 10 s each, and a
//!   bare axum route (`tests/bare-axum`, its own process at the host's optimisation level)
//!   served the same way in the same run (wrk drives both);
//! - in-process instance checkout + call, and instantiating per call for comparison;
//! - resident memory of `wharf serve` with 3 backends loaded and idle;
//! - start-up time with a cold and a warm compile cache;
//! - with Docker and the image `wharf-sandbox:test`: session create, `run_command` round trip
//!   and 32 concurrent sessions through the Wasm docker provider, against the Docker CLI
//!   (see `sandbox.rs`).
//!
//! Run with `scripts/bench` (it builds this example and installs wrk if missing).

mod console;
mod mcp;
mod mcp_bridge;
mod sandbox;
mod wrk_session;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wharf::Wharf;
use wharf::config::ServerConfig;
use wharf::runtime::ToolCall;
use wharf_integration_tests::{bundled, docker_ready};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_ready(url: &str) -> Duration {
    let started = Instant::now();
    loop {
        if let Ok(out) = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", url])
            .output()
            && out.status.success()
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{url} never came up"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn start_wharf(data_dir: &Path, bin: &Path) -> (Proc, String, Duration) {
    let port = free_port();
    // The bundled examples `serve` loads without a config, audit lines to a file.
    let config = data_dir.join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[audit]\npath = \"{}\"\n\n[backends.echo]\npath = \"bundled:echo\"\n\n\
             [backends.text-index]\npath = \"bundled:text-index\"\n\n\
             [backends.scratchpad]\npath = \"bundled:scratchpad\"\n",
            data_dir.join("audit.jsonl").display()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let child = Command::new(bin)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wharf starts");
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/readyz"));
    (Proc(child), url, started.elapsed())
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs wrk and returns (requests/s, p50 ms, p99 ms).
fn wrk(url: &str, body: &str, connections: u32, seconds: u32) -> (f64, f64, f64) {
    let lua = format!(
        "wrk.method = \"POST\"\nwrk.body = '{body}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         done = function(summary, latency, requests)\n  io.write(string.format(\"WHARF %f %f %f %d %d\\n\", \
         summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000, \
         summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))\nend\n"
    );
    let (v, text) = wharf_integration_tests::wrk::run(&lua, url, connections, seconds);
    assert_eq!(v[3], 0.0, "non-2xx replies during the run: {text}");
    assert_eq!(v[4], 0.0, "socket errors during the run: {text}");
    (v[0], v[1], v[2])
}

/// The baseline: a `bare-axum` binary (`tests/bare-axum`), one axum route with the same
/// JSON-in, JSON-out shape as a tool call and no Wasm, in its own process and built at the
/// host crate's optimisation level. Started on a free port; answers once it is ready.
fn start_bare_axum(bin: &Path) -> (Proc, u16) {
    assert!(
        bin.exists(),
        "{} is missing: `cargo build --workspace --bins` builds it (scripts/bench does)",
        bin.display()
    );
    let port = free_port();
    let child = Command::new(bin)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bare-axum starts");
    wait_ready(&format!("http://127.0.0.1:{port}/readyz"));
    (Proc(child), port)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// p50 and p99 (µs) of `samples` calls of `echo:ping` on each backend, alternating in
/// rounds so both see the same machine.
async fn ping_percentiles(
    backends: &[&wharf::runtime::LoadedBackend],
    samples: usize,
) -> Vec<(f64, f64)> {
    let call = || ToolCall {
        tenant: std::sync::Arc::from(wharf::quotas::HOST_TENANT),
        action: "ping".into(),
        args: json!({}),
        session: None,
        timeout: Duration::from_secs(5),
        trace_id: None,
        output: None,
        cancel: None,
        host: None,
    };
    for b in backends {
        for _ in 0..2_000 {
            b.call_tool(call()).await.unwrap();
        }
    }
    let mut all: Vec<Vec<f64>> = vec![Vec::with_capacity(samples); backends.len()];
    for _ in 0..samples / 1_000 {
        for (b, out) in backends.iter().zip(all.iter_mut()) {
            for _ in 0..1_000 {
                let t = Instant::now();
                b.call_tool(call()).await.unwrap();
                out.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    all.into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            (percentile(&s, 0.5), percentile(&s, 0.99))
        })
        .collect()
}

/// The same call into the 0.1.0 build of echo (through the adapters) and its 0.2.0 build.
async fn contract_versions() -> ((f64, f64), (f64, f64)) {
    let dir = tempfile::tempdir().unwrap();
    let wharf = Wharf::new(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let old = wharf
        .load_backend(
            "echo_old",
            wharf::config::BackendConfig::at(format!(
                "{}/fixtures/echo-0.1.0.wasm",
                env!("CARGO_MANIFEST_DIR")
            )),
        )
        .await
        .unwrap();
    let new = wharf.load_backend("echo", bundled("echo")).await.unwrap();
    let figures = ping_percentiles(&[&old, &new], 20_000).await;
    (figures[0], figures[1])
}

async fn in_process() -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let wharf = Wharf::new(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let echo = wharf.load_backend("echo", bundled("echo")).await.unwrap();
    let call = || ToolCall {
        tenant: std::sync::Arc::from(wharf::quotas::HOST_TENANT),
        action: "ping".into(),
        args: json!({}),
        session: None,
        timeout: Duration::from_secs(5),
        trace_id: None,
        output: None,
        cancel: None,
        host: None,
    };
    for _ in 0..2_000 {
        echo.call_tool(call()).await.unwrap();
    }
    let mut samples = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let t = Instant::now();
        echo.call_tool(call()).await.unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    let mut fresh = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        echo.behaviour().pool().fresh_instance().await.unwrap();
        fresh.push(t.elapsed().as_secs_f64() * 1e6);
    }
    fresh.sort_by(f64::total_cmp);
    (
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        percentile(&fresh, 0.5),
    )
}

fn main() {
    let seconds: u32 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rows: Vec<(String, String)> = Vec::new();
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("agent") && docker_ready() {
        let agent = rt.block_on(sandbox::run_agent(seconds));
        for (k, v) in &agent.rows {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("isolation")
        && docker_ready()
        && wharf_integration_tests::gvisor_ready()
    {
        let isolation = rt.block_on(sandbox::run_isolation());
        for (k, v) in &isolation.rows {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("preview") && docker_ready() {
        for (k, v) in &rt.block_on(sandbox::run_preview()) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("terminal") && docker_ready() {
        for (k, v) in &rt.block_on(sandbox::run_terminal()) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("egress") && docker_ready() {
        for (k, v) in &rt.block_on(sandbox::run_egress()) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("pause") && docker_ready() {
        for (k, v) in &rt.block_on(sandbox::run_pause()) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("bridge") {
        for (k, v) in &rt.block_on(mcp_bridge::run_bridge(seconds)) {
            println!("| {k} | {v} |");
        }
        if docker_ready() {
            for (k, v) in &rt.block_on(mcp_bridge::run_bridge_stdio(seconds)) {
                println!("| {k} | {v} |");
            }
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("console") {
        for (k, v) in &rt.block_on(console::run_console_pages()) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("live_soak") {
        let minutes = std::env::var("BENCH_MINUTES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        for (k, v) in &rt.block_on(console::run_live_soak(minutes)) {
            println!("| {k} | {v} |");
        }
        return;
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("warm") && docker_ready() {
        let warm = rt.block_on(sandbox::run_warm(seconds));
        for (k, v) in &warm.rows {
            println!("| {k} | {v} |");
        }
        return;
    }

    // Start-up, cold then warm compile cache.
    let data = tempfile::tempdir().unwrap();
    let dev_bin = bin_dir().join("wharf");
    let (cold, _, cold_time) = start_wharf(data.path(), &dev_bin);
    drop(cold);
    let (server, url, warm_time) = start_wharf(data.path(), &dev_bin);
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_kib(server.0.id());
    rows.push((
        "start-up, cold compile cache (3 backends)".into(),
        format!("{:.0} ms", cold_time.as_secs_f64() * 1e3),
    ));
    rows.push((
        "start-up, warm compile cache (3 backends)".into(),
        format!("{:.0} ms", warm_time.as_secs_f64() * 1e3),
    ));
    rows.push((
        "resident memory, 3 backends loaded, idle".into(),
        format!("{:.1} MiB", rss as f64 / 1024.0),
    ));

    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("mcp") {
        // Only the MCP rows (they measure REST with the same client themselves).
        let (mcp_rows, _) = rt.block_on(mcp::run(&url, seconds));
        for (k, v) in &mcp_rows {
            println!("| {k} | {v} |");
        }
        return;
    }

    // REST: Wharf vs bare axum, same machine, same client, same run.
    let (_bare, bare_port) = start_bare_axum(&bin_dir().join("bare-axum"));
    let body = r#"{"tool":"echo:ping","args":{}}"#;
    let mut ratio32 = 0.0;
    for c in [1, 32] {
        let (w_rps, w50, w99) = wrk(&format!("{url}/v1/call"), body, c, seconds);
        let (b_rps, b50, b99) = wrk(
            &format!("http://127.0.0.1:{bare_port}/v1/call"),
            body,
            c,
            seconds,
        );
        rows.push((
            format!("REST echo:ping, concurrency {c}"),
            format!("{w_rps:.0} calls/s, p50 {w50:.3} ms, p99 {w99:.3} ms"),
        ));
        rows.push((
            format!("bare axum route, concurrency {c}"),
            format!("{b_rps:.0} calls/s, p50 {b50:.3} ms, p99 {b99:.3} ms"),
        ));
        let ratio = w_rps / b_rps;
        rows.push((
            format!("ratio Wharf / bare axum, concurrency {c}"),
            format!("{ratio:.2}x"),
        ));
        if c == 32 {
            ratio32 = ratio;
        }
    }
    // The release profile beside the dev one, when `cargo build --release -p wharf -p
    // bare-axum` has built both: the same requests against the baseline's release build.
    let release_dir = bin_dir().parent().map(|target| target.join("release"));
    let release_bins = release_dir
        .map(|dir| (dir.join("wharf"), dir.join("bare-axum")))
        .filter(|(wharf, bare)| wharf.exists() && bare.exists());
    if let Some((bin, bare_bin)) = release_bins {
        let release_data = tempfile::tempdir().unwrap();
        let (release, release_url, _) = start_wharf(release_data.path(), &bin);
        let (release_bare, release_bare_port) = start_bare_axum(&bare_bin);
        for c in [1, 32] {
            let (r_rps, r50, r99) = wrk(&format!("{release_url}/v1/call"), body, c, seconds);
            let (b_rps, _, _) = wrk(
                &format!("http://127.0.0.1:{release_bare_port}/v1/call"),
                body,
                c,
                seconds,
            );
            rows.push((
                format!("REST echo:ping, concurrency {c}, release profile"),
                format!("{r_rps:.0} calls/s, p50 {r50:.3} ms, p99 {r99:.3} ms"),
            ));
            rows.push((
                format!("ratio Wharf release / bare axum release, concurrency {c}"),
                format!("{:.2}x (bare axum {b_rps:.0} calls/s)", r_rps / b_rps),
            ));
        }
        drop(release_bare);
        drop(release);
    } else {
        println!(
            "note: no target/release/wharf and target/release/bare-axum \
             (cargo build --release -p wharf -p bare-axum); release rows skipped\n"
        );
    }
    if std::env::var("WHARF_BENCH_ONLY").as_deref() == Ok("rest") {
        // Only the REST rows: a quick look while working on the hot path.
        for (k, v) in &rows {
            println!("| {k} | {v} |");
        }
        return;
    }
    let (mcp_rows, mcp_ratios) = rt.block_on(mcp::run(&url, seconds));
    rows.extend(mcp_rows);
    drop(server);

    let (p50, p99, fresh) = rt.block_on(in_process());
    rows.push((
        "in-process checkout + call + check-in".into(),
        format!("p50 {p50:.1} µs, p99 {p99:.1} µs"),
    ));
    rows.push((
        "in-process instantiate + warmup (no pool)".into(),
        format!("p50 {fresh:.1} µs"),
    ));
    let ((old50, old99), (new50, new99)) = rt.block_on(contract_versions());
    rows.push((
        "in-process call, echo built against 0.1.0 (adapters)".into(),
        format!("p50 {old50:.1} µs, p99 {old99:.1} µs"),
    ));
    rows.push((
        "in-process call, echo built against 0.2.0".into(),
        format!("p50 {new50:.1} µs, p99 {new99:.1} µs"),
    ));
    rows.push((
        "ratio 0.1.0 / 0.2.0, in-process call p50".into(),
        format!("{:.2}x", old50 / new50),
    ));

    let sandbox = if docker_ready() {
        Some(rt.block_on(sandbox::run(seconds)))
    } else {
        println!(
            "note: no Docker engine or no image wharf-sandbox:test (scripts/build-test-image.sh); sandbox rows skipped\n"
        );
        None
    };
    if let Some(s) = &sandbox {
        rows.extend(s.rows.iter().cloned());
    }

    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(10);
    println!("| {:width$} | figure |", "measure");
    println!("|{}|---|", "-".repeat(width + 2));
    for (k, v) in &rows {
        println!("| {k:width$} | {v} |");
    }
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    let (create, exec, warm, agent, many) = match &sandbox {
        Some(s) => (
            met(s.create_ratio <= 1.2),
            met(s.exec_ratio <= 0.5),
            met(s.warm_hit.0 <= 10.0 && s.warm_hit.1 <= 0.05),
            met(s.agent_exec.0 <= 2.0 && s.agent_exec.1 <= 0.03),
            met(s.concurrent.0 >= 4.0 * 235.0 && s.concurrent.1 >= 0.5 && s.concurrent.2 <= 200.0),
        ),
        None => ("skipped", "skipped", "skipped", "skipped", "skipped"),
    };
    println!(
        "\ntargets: ratio at concurrency 32 >= 0.5 ({}), warm call <= 10 µs ({}), warm start <= 300 ms ({}), \
         session create <= 1.2x docker run ({create}), run_command <= 0.5x docker exec ({exec}), \
         warm-pool hit <= 10 ms and <= 0.05x docker run ({warm}), \
         run_command through the agent <= 2 ms and <= 0.03x docker exec ({agent}), \
         100 sessions >= 4x 235 commands/s, >= 0.5x the spawn limit, p99 <= 200 ms, 0 failures ({many})",
        met(ratio32 >= 0.5),
        met(p50 <= 10.0),
        met(warm_time <= Duration::from_millis(300)),
    );
    let python = |ratio: f64| {
        if ratio.is_nan() {
            "skipped".to_string()
        } else {
            format!("{}, {ratio:.1}x", met(ratio >= 10.0))
        }
    };
    println!(
        "targets: REST at concurrency 32 >= 0.8x bare axum with audit to a file ({}), MCP per session >= 10x \
         the Python SDK's server (wrk as the client: {}; the reqwest client: {}), MCP per session >= 0.5x REST ({})",
        met(ratio32 >= 0.8),
        python(mcp_ratios.wrk_vs_python),
        python(mcp_ratios.vs_python),
        met(mcp_ratios.vs_rest >= 0.5),
    );
}

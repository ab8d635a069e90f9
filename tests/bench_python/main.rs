//! What a Python backend costs: the example `plugins/python-workbench` (an 18 MB
//! componentize-py component) served by real `wharf serve` processes.
//!
//! - a cold first load (empty compile cache): load time, host RSS after it, and the peak;
//! - the same with the compile in-process (`WHARF_COMPILE_IN_PROCESS=1`, the old behaviour);
//! - a restart with a warm compile cache: load time and RSS;
//! - RSS per additional warm instance (`pool_min` 1 vs 9);
//! - warm call latency over REST (sequential keep-alive calls of `workbench:divide`).
//!
//! Run with `scripts/bench` (or `cargo run -p wharf-integration-tests --example bench_python`
//! after `cargo build --workspace --bins`). Figures are printed, not asserted.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wharf_integration_tests::python::workbench_wasm;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wharf_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("wharf")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `/proc/PID/status` fields in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Started {
    proc: Proc,
    url: String,
    ready: Duration,
}

/// Starts `wharf serve` with the workbench at `pool_min` instances; returns once it serves.
fn start(wasm: &Path, data: &Path, pool_min: usize, in_process: bool) -> Started {
    let config = data.join(format!("wharf-{pool_min}.toml"));
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = {data:?}\n\n[backends.workbench]\npath = {wasm:?}\n\n\
             [backends.workbench.limits]\npool_min = {pool_min}\npool_max = 16\n",
            data = data.display().to_string(),
            wasm = wasm.display().to_string(),
        ),
    )
    .unwrap();
    let port = free_port();
    let mut cmd = Command::new(wharf_bin());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--config",
    ])
    .arg(&config)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if in_process {
        cmd.env("WHARF_COMPILE_IN_PROCESS", "1");
    }
    let started = Instant::now();
    let proc = Proc(cmd.spawn().expect("wharf starts"));
    let url = format!("http://127.0.0.1:{port}");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "wharf never came up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let ready = started.elapsed();
    Started { proc, url, ready }
}

/// RSS once the process has settled (background instance refills done).
fn settled_rss_kib(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_secs(2));
    status_kib(pid, "VmRSS:")
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

async fn call_latencies(url: &str, n: usize) -> Vec<f64> {
    let client = reqwest::Client::new();
    let body = json!({"tool": "workbench:divide", "args": {"a": 1, "b": 4}});
    let mut ms = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let t = Instant::now();
        let reply: serde_json::Value = client
            .post(format!("{url}/v1/call"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
        if i >= 20 {
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    ms.sort_by(f64::total_cmp);
    ms
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let wasm = workbench_wasm();
    let size = std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0);
    let mut rows: Vec<(String, String)> = vec![(
        "component size".into(),
        format!("{:.1} MB", size as f64 / 1e6),
    )];

    // Cold, compile in a worker process (the default).
    let data = tempfile::tempdir().unwrap();
    let cold = start(&wasm, data.path(), 1, false);
    let cold_rss = settled_rss_kib(cold.proc.0.id());
    let cold_peak = status_kib(cold.proc.0.id(), "VmHWM:");
    let cold_ready = cold.ready;
    drop(cold);
    rows.push((
        "cold first load (compile in a worker), ready after".into(),
        format!("{} ms", cold_ready.as_millis()),
    ));

    // Warm restart on the cache the cold start wrote.
    let warm = start(&wasm, data.path(), 1, false);
    let warm_rss = settled_rss_kib(warm.proc.0.id());
    let warm_ready = warm.ready;
    let latencies = call_latencies(&warm.url, 500).await;
    drop(warm);

    // Cold with the compile in-process: the behaviour before the worker.
    let inproc_data = tempfile::tempdir().unwrap();
    let inproc = start(&wasm, inproc_data.path(), 1, true);
    let inproc_ready = inproc.ready;
    let inproc_rss = settled_rss_kib(inproc.proc.0.id());
    drop(inproc);

    // Additional warm instances.
    let many = start(&wasm, data.path(), 9, false);
    let many_rss = settled_rss_kib(many.proc.0.id());
    drop(many);
    let per_instance = many_rss.saturating_sub(warm_rss) / 8;

    rows.push(("host RSS after the cold first load".into(), mib(cold_rss)));
    rows.push((
        "  peak RSS during it (the host; the worker is a child)".into(),
        mib(cold_peak),
    ));
    rows.push((
        "host RSS, warm-cache start, same backend".into(),
        mib(warm_rss),
    ));
    let ratio = cold_rss as f64 / warm_rss.max(1) as f64;
    rows.push(("ratio cold / warm".into(), format!("{ratio:.2}x")));
    rows.push((
        "cold first load, compile in-process (before)".into(),
        format!("{} ms, RSS {}", inproc_ready.as_millis(), mib(inproc_rss)),
    ));
    let before_ratio = inproc_rss as f64 / warm_rss.max(1) as f64;
    rows.push((
        "ratio in-process cold / warm (before)".into(),
        format!("{before_ratio:.2}x"),
    ));
    rows.push((
        "warm-cache restart, ready after".into(),
        format!("{} ms", warm_ready.as_millis()),
    ));
    rows.push((
        "RSS per additional warm instance (pool_min 1 -> 9)".into(),
        mib(per_instance),
    ));
    rows.push((
        "warm call over REST, p50 / p99 of 500".into(),
        format!(
            "{:.3} ms / {:.3} ms",
            pct(&latencies, 0.5),
            pct(&latencies, 0.99)
        ),
    ));

    println!("| Python backend measure | figure |");
    println!("|---|---|");
    for (k, v) in &rows {
        println!("| {k} | {v} |");
    }
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "\ntargets: cold RSS <= 1.5x warm ({}), warm call p50 <= 2 ms ({}), warm restart <= 1 s ({}), additional instance <= 10 MiB ({})",
        met(ratio <= 1.5),
        met(pct(&latencies, 0.5) <= 2.0),
        met(warm_ready <= Duration::from_secs(1)),
        met(per_instance <= 10 * 1024),
    );
}

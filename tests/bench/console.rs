//! The operator's console (issue 39): page loads with 50 backends and 1,000 sessions, the
//! live view's first event after a call (`WHARF_BENCH_ONLY=console`), and the live view
//! watching under the full REST load for `BENCH_MINUTES` (60 by default) with the host's
//! memory sampled once a minute (`WHARF_BENCH_ONLY=live_soak`).

use std::time::{Duration, Instant};
use wharf_integration_tests::live_view::{LiveWatcher, console_cookie, live_view_soak};
use wharf_integration_tests::processes::WharfProcess;

const ADMIN: &str = "t-bench-console-admin-41c9";

fn config(dir: &std::path::Path, echoes: usize) -> std::path::PathBuf {
    let mut text = format!(
        "[server]\ndata_dir = \"{}\"\n\n[[auth.tokens]]\nname = \"ops\"\nvalue = \"{ADMIN}\"\n\
         scopes = [\"admin\"]\n\n[backends.echo]\npath = \"bundled:echo\"\n\n\
         [backends.scratchpad]\npath = \"bundled:scratchpad\"\n\n",
        dir.join("data").display()
    );
    for i in 0..echoes {
        text.push_str(&format!(
            "[backends.echo{i:02}]\npath = \"bundled:echo\"\n\n"
        ));
    }
    let path = dir.join("wharf.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn percentile(samples: &mut [f64], q: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples.get(i).copied().unwrap_or(0.0)
}

/// Page loads (Backends, Sessions) with 50 backends and 1,000 sessions, and the live view's
/// first event after a call.
pub async fn run_console_pages() -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    // echo and scratchpad, and 48 more echoes: 50 backends.
    let host = WharfProcess::start(&config(dir.path(), 48));
    let url = host.url.clone();
    let http = reqwest::Client::new();
    let made = Instant::now();
    for i in 0..1000 {
        let reply: serde_json::Value = http
            .post(format!("{url}/v1/sessions"))
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({"backend": "scratchpad", "key": format!("bench-{i}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
    }
    let made = made.elapsed();
    let cookie = console_cookie(&url, ADMIN).await;
    let mut rows = vec![(
        "console: sessions created for the page test".to_string(),
        format!("1000 in {:.1} s", made.as_secs_f64()),
    )];
    for (page, name, needle) in [
        ("/console", "Backends, 50 backends", "echo47"),
        ("/console/sessions", "Sessions, 1,000 sessions", "bench-999"),
        ("/console/health", "Health, 50 backends", "Health"),
    ] {
        let mut ms = Vec::new();
        let mut bytes = 0;
        for _ in 0..30 {
            let started = Instant::now();
            let reply = http
                .get(format!("{url}{page}"))
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 200, "{page}");
            let text = reply.text().await.unwrap();
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(text.contains(needle), "{page} lists {needle}");
            bytes = text.len();
        }
        rows.push((
            format!(
                "console page load: {name} (p50 / p99 of 30, {} KiB)",
                bytes / 1024
            ),
            format!(
                "{:.1} ms / {:.1} ms",
                percentile(&mut ms, 0.5),
                percentile(&mut ms, 0.99)
            ),
        ));
    }
    let watcher = LiveWatcher::open(&url, &cookie).await;
    let mut first = Vec::new();
    for _ in 0..50 {
        let seen = watcher.calls.load(std::sync::atomic::Ordering::Relaxed);
        let started = Instant::now();
        let reply: serde_json::Value = http
            .post(format!("{url}/v1/call"))
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({"tool": "echo:say", "args": {"text": "hi"}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0);
        watcher
            .wait_past(seen, Duration::from_secs(5))
            .await
            .expect("the call's event");
        first.push(started.elapsed().as_secs_f64() * 1e3);
    }
    watcher.close();
    rows.push((
        "live view: the call's event at the watcher, from sending the call (p50 / p99 of 50)"
            .to_string(),
        format!(
            "{:.2} ms / {:.2} ms",
            percentile(&mut first, 0.5),
            percentile(&mut first, 0.99)
        ),
    ));
    rows
}

/// The live view watching for `minutes` while 32 callers call as fast as the host answers.
pub async fn run_live_soak(minutes: u64) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&config(dir.path(), 0));
    let idle = wharf_integration_tests::processes::rss_kib(host.pid());
    let report = live_view_soak(
        &host.url,
        ADMIN,
        host.pid(),
        Duration::from_secs(minutes * 60),
        32,
        Duration::ZERO,
    )
    .await;
    let mib = |kib: u64| kib as f64 / 1024.0;
    vec![
        (
            format!("live view soak: {minutes} min, 32 callers, calls/s"),
            format!(
                "{:.0} ({} calls, {} failed)",
                report.calls as f64 / (minutes * 60) as f64,
                report.calls,
                report.failed
            ),
        ),
        (
            "live view soak: events read / calls skipped (told)".to_string(),
            format!("{} / {}", report.events, report.skipped),
        ),
        (
            "live view soak: host RSS idle, after 1 min, largest, last (MiB)".to_string(),
            format!(
                "{:.1}, {:.1}, {:.1}, {:.1}",
                mib(idle),
                mib(report.rss_kib.first().copied().unwrap_or(0)),
                mib(report.rss_kib.iter().max().copied().unwrap_or(0)),
                mib(report.rss_kib.last().copied().unwrap_or(0))
            ),
        ),
        (
            "live view soak: growth, first sample to the largest of the second half".to_string(),
            format!("{:.1} MiB", mib(report.growth_kib())),
        ),
    ]
}

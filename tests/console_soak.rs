//! The console's live view under a steady load for `WHARF_LIVE_SOAK_SECONDS` (600 by
//! default; `.ci/run` runs it beside the suite, as it is ignored by a plain `cargo test`):
//! a real `wharf serve` answers `WHARF_LIVE_SOAK_CLIENTS` callers' (2; CI runs one)
//! `echo:say` calls, each pausing 10 ms between calls, while a signed-in live view watches. Holds: no call fails, the watcher read (or was told it skipped) every call, and
//! the host's resident memory stays flat (the largest sample of the second half at most
//! 16 MiB over the first, taken after a minute of load). The bench's one-hour run
//! (`WHARF_BENCH_ONLY=live_soak`) is the same soak under the full REST load.

use std::time::Duration;
use wharf_integration_tests::live_view::live_view_soak;
use wharf_integration_tests::processes::WharfProcess;

const ADMIN: &str = "t-soak-admin-6d2e90";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "ten minutes: .ci/run runs it beside the suite"]
async fn the_live_view_keeps_host_memory_flat_under_load() {
    let seconds: u64 = std::env::var("WHARF_LIVE_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[[auth.tokens]]\nname = \"ops\"\nvalue = \"{ADMIN}\"\n\
             scopes = [\"admin\"]\n\n[backends.echo]\npath = \"bundled:echo\"\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let clients: usize = std::env::var("WHARF_LIVE_SOAK_CLIENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let host = WharfProcess::start(&config);
    let report = live_view_soak(
        &host.url,
        ADMIN,
        host.pid(),
        Duration::from_secs(seconds),
        clients,
        Duration::from_millis(10),
    )
    .await;
    println!("live view soak, {seconds} s: {report:?}");
    assert!(report.calls > 0);
    assert_eq!(report.failed, 0, "{report:?}");
    assert!(
        report.events + report.skipped + clients as u64 >= report.calls,
        "the watcher saw or was told of every call: {report:?}"
    );
    assert!(
        report.growth_kib() <= 16 * 1024,
        "host memory grew by {} KiB: {report:?}",
        report.growth_kib()
    );
}

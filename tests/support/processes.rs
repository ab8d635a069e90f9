//! Real `wharf serve` processes (for multi-process, restart and kill -9 tests) and fresh
//! PostgreSQL databases.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `wharf` binary next to the test executable.
///
/// `cargo test --workspace` builds it (the `wharf` package's own integration tests need it);
/// when only this crate's tests are run it may be missing, so it is built here once.
pub fn wharf_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test exe");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target dir")
                .to_path_buf();
            let bin = profile_dir.join("wharf");
            if !bin.exists() {
                let mut build = Command::new(env!("CARGO"));
                // The whole workspace, as `cargo test --workspace` resolves features: building
                // `-p wharf` alone would rebuild the dependencies with other features.
                build.args(["build", "--workspace", "--bins"]);
                if profile_dir
                    .file_name()
                    .is_some_and(|name| name == "release")
                {
                    build.arg("--release");
                }
                if let Some(target_dir) = profile_dir.parent() {
                    build.arg("--target-dir").arg(target_dir);
                }
                let status = build.status().expect("cargo runs");
                assert!(status.success(), "building the wharf binary failed");
            }
            bin
        })
        .clone()
}

/// A `wharf serve` child process; killed (SIGKILL) when dropped.
pub struct WharfProcess {
    child: Child,
    /// Base URL.
    pub url: String,
}

impl WharfProcess {
    /// Starts `wharf serve --config CONFIG` on a free port and waits until it is ready.
    ///
    /// The port is found by binding `:0` and letting it go, so another process may take it
    /// before this one binds: a child that exits while its port answers is such a loser,
    /// and it is started again on another port.
    pub fn start(config: &Path) -> WharfProcess {
        for _ in 0..3 {
            if let Some(process) = Self::try_start(config) {
                return process;
            }
        }
        panic!("wharf did not start on a free port in three tries");
    }

    fn try_start(config: &Path) -> Option<WharfProcess> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("addr")
            .port();
        let log = config.with_extension(format!("{port}.log"));
        let mut child = Command::new(wharf_bin())
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--config",
            ])
            .arg(config)
            .env("RUST_LOG", "info,wharf=debug")
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(&log)
                    .map(Stdio::from)
                    .unwrap_or(Stdio::null()),
            )
            .spawn()
            .expect("wharf starts");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(
                    said.contains("Address already in use")
                        || said.contains("address already in use"),
                    "wharf exited at start; log: {said}"
                );
                return None;
            }
            if answers_http(port) {
                // The port answers; it is ours only if the child is still running.
                std::thread::sleep(Duration::from_millis(20));
                if let Ok(Some(_)) = child.try_wait() {
                    return None;
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "wharf did not start; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(WharfProcess { child, url })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for the exit; returns whether it exited cleanly in time.
    pub fn terminate(mut self, within: Duration) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, like `kill -9`.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WharfProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh, empty PostgreSQL database from `WHARF_TEST_POSTGRES_URL` (an admin URL), or
/// `None` (the test is skipped) when it is unset. With `WHARF_REQUIRE_POSTGRES=1` a missing
/// server fails the test.
pub fn fresh_postgres() -> Option<String> {
    let Ok(admin) = std::env::var("WHARF_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("WHARF_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "PostgreSQL is required (WHARF_REQUIRE_POSTGRES=1) but WHARF_TEST_POSTGRES_URL is not set"
        );
        eprintln!("skipping the PostgreSQL variant: WHARF_TEST_POSTGRES_URL is not set");
        return None;
    };
    let name = format!("wharf_t_{}", uuid::Uuid::new_v4().simple());
    let out = Command::new("psql")
        .arg(&admin)
        .args(["-q", "-c", &format!("CREATE DATABASE {name}")])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "creating a test database failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or(admin);
    Some(format!("{base}/{name}"))
}

/// The store URLs a durability test runs against: a shared SQLite file in `dir`, and a
/// fresh PostgreSQL database when one is configured.
pub fn store_urls(dir: &Path) -> Vec<(&'static str, String)> {
    let mut urls = vec![(
        "sqlite",
        format!("sqlite://{}?mode=rwc", dir.join("shared.db").display()),
    )];
    if let Some(pg) = fresh_postgres() {
        urls.push(("postgres", pg));
    }
    urls
}

/// Whether an HTTP server answers on `port`. A bare TCP connect is not enough: to a port of
/// the ephemeral range that nobody listens on yet, Linux may pick that same port as the
/// source and connect the socket to itself (a simultaneous open), and the test then talks
/// to nobody.
pub fn answers_http(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

/// The resident memory of process `pid`, KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! registry) on a free loopback port with its own storage, and the real `wharf` binary.

use crate::free_port;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary (Debian package `docker-registry`).
const BINARY: &str = "docker-registry";

/// A running registry; killed when dropped.
pub struct LocalRegistry {
    child: Option<Child>,
    port: u16,
    storage: tempfile::TempDir,
    config: PathBuf,
}

impl LocalRegistry {
    /// Starts a registry, or `None` (the test is skipped) when the binary is missing and
    /// `WHARF_REQUIRE_REGISTRY` is not set.
    pub fn start() -> Option<Self> {
        let present = Command::new(BINARY)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !present {
            assert!(
                std::env::var_os("WHARF_REQUIRE_REGISTRY").is_none(),
                "{BINARY} is not installed (apt-get install docker-registry)"
            );
            eprintln!("skipped: {BINARY} is not installed");
            return None;
        }
        let storage = tempfile::tempdir().expect("storage");
        let port = free_port();
        let config = storage.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.path().join("data").display()
            ),
        )
        .expect("config");
        let mut registry = LocalRegistry {
            child: None,
            port,
            storage,
            config,
        };
        registry.restart();
        Some(registry)
    }

    /// Starts it again (same port, same storage).
    pub fn restart(&mut self) {
        let log = std::fs::File::create(self.storage.path().join("registry.log")).expect("log");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the registry starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !crate::processes::answers_http(self.port) {
            assert!(Instant::now() < deadline, "the registry did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `oci://127.0.0.1:PORT/REPO_AND_TAG`.
    pub fn reference(&self, repo_and_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_and_tag}", self.port)
    }

    /// Flips the last byte of the stored blob whose content is `original`, as a disk or a
    /// hostile mirror would: the registry keeps serving it under its old digest.
    pub fn tamper_blob(&self, original: &[u8]) {
        let hex = hex_sha256(original);
        let path = self
            .storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(&hex)
            .join("data");
        let mut bytes = std::fs::read(&path).expect("the blob is stored");
        if let Some(last) = bytes.last_mut() {
            *last ^= 0xff;
        }
        std::fs::write(&path, bytes).expect("tampered");
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs the `wharf` binary; its stdout, trimmed. Panics (with stderr) when it fails.
pub fn wharf_cli(args: &[&str]) -> String {
    let out = Command::new(crate::processes::wharf_bin())
        .args(args)
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "wharf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The bundled echo component written to `DIR/echo.wasm`.
pub fn echo_file(dir: &Path) -> PathBuf {
    let path = dir.join("echo.wasm");
    std::fs::write(&path, wharf::bundled::wasm("echo").expect("bundled echo")).expect("write");
    path
}

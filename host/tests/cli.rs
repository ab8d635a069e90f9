//! The `wharf` binary: `serve` with no config serves the bundled examples; `tools`, `call`
//! and `inspect` work against it.

// A test fails by panicking; the crate-wide lints are for the host's own code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn wharf_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wharf"))
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn serve_tools_call_and_inspect() {
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = Server(
        Command::new(wharf_bin())
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(data.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("wharf starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new(wharf_bin())
            .args(["tools", "--url", &url])
            .output()
            .unwrap();
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(text.contains("echo:say"), "{text}");
            assert!(text.contains("text-index:search"), "{text}");
            assert!(text.contains("scratchpad:write"), "{text}");
            assert!(
                !text.contains("misbehaving"),
                "the test-only backend is not served by default"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = Command::new(wharf_bin())
        .args([
            "call",
            "echo:say",
            "--args",
            r#"{"text":"cli"}"#,
            "--url",
            &url,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["data"]["result"]["text"], "cli");

    let out = Command::new(wharf_bin())
        .args(["call", "echo:say", "--args", "{}", "--url", &url])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a failed call exits non-zero");

    let out = Command::new(wharf_bin())
        .args(["inspect", "bundled:scratchpad", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["world"], "resource-backend");
    assert_eq!(info["wit"], "wharf:plugin@0.2.0");
    assert_eq!(info["contract"], "0.2.0");
    assert_eq!(info["tools"][0]["action"], "write");
    assert_eq!(info["tools"][0]["session"], "required");
    assert!(info["tools"][0]["input_schema"]["properties"]["note"].is_object());
    assert!(info["session_config_schema"]["properties"]["title"].is_object());
    assert!(info["requires"]["images"].is_array());
}

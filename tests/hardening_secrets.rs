//! Secrets and the host's log (issue 9): a run that writes a secret into a sandbox file and
//! runs a command that exports one leaves neither in the log of a real `wharf serve` (the
//! audit line carries their length and sha256); a guest's log line cannot forge another
//! line; the data dir is 0700 and the files in it 0600.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use wharf_integration_tests::processes::WharfProcess;
use wharf_integration_tests::{bundled, docker_ready, start_with};

/// Everything the `wharf serve` processes of `dir` logged.
fn logs(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

fn serve(dir: &Path, backends: &str) -> WharfProcess {
    let config = dir.join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[audit]\npath = \"{}\"\n\n{backends}",
            dir.join("data").display(),
            dir.join("audit.log").display()
        ),
    )
    .unwrap();
    WharfProcess::start(&config)
}

async fn post(server: &WharfProcess, path: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{}{path}", server.url))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_written_to_files_and_commands_never_reach_the_log() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        "[backends.docker]\npath = \"bundled:docker-provider\"\n[backends.docker.grants]\nimages = [\"wharf-sandbox:test\"]\nnetworks = [\"bridge\"]\n",
    );
    let secret = format!("sk-live-{}", uuid::Uuid::new_v4().simple());
    let created = post(
        &server,
        "/v1/sessions",
        json!({"backend": "docker", "key": format!("secrets-{}", uuid::Uuid::new_v4())}),
    )
    .await;
    let session = created["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    let content = format!("API_TOKEN={secret}\n");
    let wrote = post(
        &server,
        "/v1/call",
        json!({"tool": "docker:write_file", "session_id": session,
               "args": {"path": "/work/.env", "content": content}}),
    )
    .await;
    assert_eq!(wrote["code"], 0, "{wrote}");
    let command = format!("export TOKEN={secret}; cat /work/.env | wc -c");
    let ran = post(
        &server,
        "/v1/call",
        json!({"tool": "docker:run_command", "session_id": session, "args": {"command": command}}),
    )
    .await;
    assert_eq!(ran["code"], 0, "{ran}");
    reqwest::Client::new()
        .delete(format!("{}/v1/sessions/{session}", server.url))
        .send()
        .await
        .unwrap();
    assert!(server.terminate(Duration::from_secs(40)), "clean exit");

    let log = logs(dir.path());
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(r#""event":"tool_call""#))
        .collect();
    assert_eq!(audit.len(), 2, "one audit line per call: {log}");
    assert!(
        !log.contains(&secret),
        "the secret reached the host's log:\n{}",
        log.lines()
            .filter(|l| l.contains(&secret))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let digest = |s: &str| hex_sha256(s.as_bytes());
    assert!(
        audit[0].contains("/work/.env") && audit[0].contains(&digest(&content)),
        "the audit line names the path and the content's sha256: {}",
        audit[0]
    );
    assert!(
        audit[1].contains(&digest(&command)),
        "the audit line carries the command's sha256: {}",
        audit[1]
    );
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_log_line_cannot_forge_another_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        "[backends.misbehaving]\npath = \"bundled:misbehaving\"\n",
    );
    let forged = "all good\nFORGED 2026-01-01T00:00:00Z  INFO wharf::audit: event=\"tool_call\" tenant=admin code=0\r\nFORGED-2\u{2028}FORGED-3";
    let reply = post(
        &server,
        "/v1/call",
        json!({"tool": "misbehaving:log", "args": {"message": forged}}),
    )
    .await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert!(server.terminate(Duration::from_secs(40)), "clean exit");
    let log = logs(dir.path());
    let guest: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("wharf::guest") && l.contains("all good"))
        .collect();
    assert_eq!(guest.len(), 1, "the guest's line is logged once: {log}");
    assert!(
        guest[0].contains("FORGED-3"),
        "the whole message stays on the guest's line: {}",
        guest[0]
    );
    // The call's span is off at the default log level, so the line names its call itself.
    let trace_id = reply["meta"]["trace_id"].as_str().unwrap_or_default();
    assert!(
        !trace_id.is_empty() && guest[0].contains("trace_id=") && guest[0].contains(trace_id),
        "the guest's line carries the call's trace id {trace_id}: {}",
        guest[0]
    );
    let forged_lines: Vec<&str> = log
        .split(['\n', '\r', '\u{2028}'])
        .filter(|l| l.starts_with("FORGED"))
        .collect();
    assert!(
        forged_lines.is_empty(),
        "the guest forged log lines: {forged_lines:?}"
    );
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_dir_is_private() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("fresh").join("data");
    let h = {
        let data = data.clone();
        start_with(vec![("echo", bundled("echo"))], move |s| s.data_dir = data).await
    };
    assert_eq!(h.call("echo:ping", json!({})).await.code(), 0);
    assert_eq!(mode(&data), 0o700, "the data dir");
    let mut files = vec![data.join("wharf.db"), data.join("node-id")];
    for side in ["wharf.db-wal", "wharf.db-shm"] {
        if data.join(side).exists() {
            files.push(data.join(side));
        }
    }
    let cache: Vec<_> = std::fs::read_dir(data.join("compile-cache"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    assert!(!cache.is_empty(), "the compile cache holds the component");
    files.extend(cache);
    for file in files {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    assert_eq!(h.get("/healthz").await.status, 200);
}

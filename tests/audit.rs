//! The audit sink of a real `wharf serve`: JSON lines in their own file, apart from the
//! human log, secrets redacted, rotated by size, and a sink that cannot keep up drops and
//! counts lines instead of holding calls up.

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use wharf_integration_tests::processes::WharfProcess;

fn serve(dir: &Path, audit: &str) -> WharfProcess {
    let config = dir.join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[audit]\n{audit}\n\n[[auth.tokens]]\nname = \"auditor\"\nvalue = \"s3cret-token\"\nscopes = [\"call\", \"read\"]\n\n[backends.echo]\npath = \"bundled:echo\"\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    WharfProcess::start(&config)
}

async fn call(client: &reqwest::Client, url: &str, args: Value) -> Value {
    client
        .post(format!("{url}/v1/call"))
        .bearer_auth("s3cret-token")
        .json(&json!({"tool": "echo:say", "args": args}))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn human_log(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_lines_are_json_in_their_own_rotated_files_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit").join("calls.jsonl");
    let server = serve(
        dir.path(),
        &format!("path = \"{}\"\nmax_bytes = 2000\nkeep = 2", audit.display()),
    );
    let client = reqwest::Client::new();
    let refused = call(
        &client,
        &server.url,
        json!({"text": "visible", "api_key": "hunter2"}),
    )
    .await;
    assert_eq!(refused["code"], 4004, "{refused}");
    for i in 0..40 {
        let ok = call(&client, &server.url, json!({"text": format!("call {i}")})).await;
        assert_eq!(ok["code"], 0, "{ok}");
    }
    assert!(server.terminate(Duration::from_secs(40)), "clean exit");

    let mut files: Vec<_> = std::fs::read_dir(audit.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["calls.jsonl", "calls.jsonl.1", "calls.jsonl.2"],
        "rotated by size, `keep` old files kept"
    );
    for file in &files {
        let size = std::fs::metadata(file).unwrap().len();
        assert!(size < 2000 + 1024, "{} is {size} bytes", file.display());
    }
    let lines: Vec<Value> = files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect::<Vec<_>>()
        })
        .collect();
    let calls: Vec<&Value> = lines.iter().filter(|l| l["event"] == "tool_call").collect();
    assert!(
        calls.len() >= 10 && calls.len() < 41,
        "the newest lines are kept, the oldest rotated away: {}",
        calls.len()
    );
    let last = calls
        .iter()
        .find(|l| l["args"].as_str().unwrap_or("").contains("call 39"))
        .expect("the last call's line is in the newest files");
    assert_eq!(last["tenant"], "auditor");
    assert_eq!(last["tool"], "echo:say");
    assert_eq!(last["code"], 0);
    assert!(last["duration_ms"].is_u64(), "{last}");
    assert!(
        last["ts"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{last}"
    );

    let everything: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<String>()
        + &human_log(dir.path());
    assert!(
        !everything.contains("hunter2"),
        "a secret argument was written"
    );
    assert!(
        !everything.contains("s3cret-token"),
        "the token was written"
    );
    assert!(
        !human_log(dir.path()).contains("tool_call"),
        "audit lines stay out of the human log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_cannot_keep_up_drops_and_counts_lines_without_holding_calls() {
    let dir = tempfile::tempdir().unwrap();
    // A FIFO nobody reads: once the pipe's buffer is full the writer is stuck for good.
    let fifo = dir.path().join("stuck.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Held open (read and write, so opening does not wait) and never read.
    let _never_read = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let server = serve(
        dir.path(),
        &format!(
            "path = \"{}\"\nmode = \"drop\"\nqueue_lines = 8",
            fifo.display()
        ),
    );
    let client = reqwest::Client::new();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let (client, url) = (client.clone(), server.url.clone());
            tokio::spawn(async move {
                for i in 0..100 {
                    let text = format!("{t}-{i}-{}", "x".repeat(200));
                    let r = call(&client, &url, json!({"text": text})).await;
                    assert_eq!(r["code"], 0, "{r}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let metrics = client
        .get(format!("{}/metrics", server.url))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("wharf_audit_lines_dropped_total "))
        .unwrap_or_else(|| panic!("no drop counter in {metrics}"))
        .trim()
        .parse()
        .unwrap();
    assert!(
        dropped > 0 && dropped <= 800,
        "800 calls, a 64 KiB pipe: {dropped}"
    );
}

/// Large arguments are redacted before the line is queued, small ones by the writer: both
/// lines read the same way, content as its length and sha256, secrets hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_small_arguments_are_redacted_alike() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("calls.jsonl");
    let server = serve(dir.path(), &format!("path = \"{}\"", audit.display()));
    let client = reqwest::Client::new();
    let large = "L".repeat(3000);
    let small = "s".repeat(200);
    for text in [&large, &small] {
        let refused = call(
            &client,
            &server.url,
            json!({"text": text, "api_key": "hunter2"}),
        )
        .await;
        assert_eq!(refused["code"], 4004, "{refused}");
        let ok = call(&client, &server.url, json!({"text": text})).await;
        assert_eq!(ok["code"], 0, "{ok}");
    }
    assert!(server.terminate(Duration::from_secs(40)), "clean exit");
    let written = std::fs::read_to_string(&audit).unwrap();
    assert!(
        !written.contains("hunter2"),
        "a secret argument was written"
    );
    let calls: Vec<Value> = written
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|l| l["event"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 4, "{written}");
    for (line, text) in calls.iter().zip([&large, &large, &small, &small]) {
        let args: Value = serde_json::from_str(line["args"].as_str().unwrap()).unwrap();
        let sha256: String = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            args["text"],
            json!({"len": text.len(), "sha256": sha256}),
            "{line}"
        );
        assert!(
            !line["args"].as_str().unwrap().contains(text.as_str()),
            "{line}"
        );
    }
    assert_eq!(calls[0]["code"], 4004);
    assert_eq!(calls[1]["code"], 0);
}

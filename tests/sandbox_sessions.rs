//! Sandbox sessions of the docker provider with the sandbox agent, through a real host and
//! real Docker: the toolset's process tools, whose processes and output outlive a `kill -9`
//! of the host; a long command's output streamed as it is written, to a REST client as
//! NDJSON lines and to the official MCP Python SDK as progress notifications.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wharf_integration_tests::processes::WharfProcess;
use wharf_integration_tests::python::{mcp_sdk, repo_root};
use wharf_integration_tests::{docker_provider, docker_ready, remove_backend_containers, start};

fn write_config(dir: &Path) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"

[backends.agentdocker]
path = "bundled:docker-provider"
[backends.agentdocker.grants]
images = ["wharf-sandbox:test"]
"#,
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

async fn call_in(url: &str, session: &str, tool: &str, args: Value) -> Value {
    let reply: Value = reqwest::Client::new()
        .post(format!("{url}/v1/call"))
        .json(&json!({"tool": tool, "args": args, "session_id": session}))
        .send()
        .await
        .expect("the host answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(reply["code"], 0, "{tool} {args}: {reply}");
    reply["data"]["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_processes_and_their_output_outlive_kill_9_of_the_host() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("agentdocker");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let first = WharfProcess::start(&config);
    let tools: Value = reqwest::get(format!("{}/v1/tools", first.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for name in [
        "start_process",
        "process_output",
        "send_input",
        "kill_process",
        "list_processes",
    ] {
        assert!(
            tools.to_string().contains(&format!("agentdocker:{name}")),
            "the toolset offers {name}: {tools}"
        );
    }
    let session: Value = reqwest::Client::new()
        .post(format!("{}/v1/sessions", first.url))
        .json(&json!({"backend": "agentdocker", "key": "durable"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = session["data"]["id"]
        .as_str()
        .expect("a session")
        .to_string();
    let started = call_in(
        &first.url,
        &sid,
        "agentdocker:start_process",
        json!({"command": "i=0; while :; do echo tick$i; i=$((i+1)); sleep 0.05; done"}),
    )
    .await;
    let pid = started["pid"].as_u64().unwrap();
    let before = call_in(
        &first.url,
        &sid,
        "agentdocker:process_output",
        json!({"pid": pid, "wait_ms": 1000}),
    )
    .await;
    assert!(
        before["output"].as_str().unwrap().starts_with("tick0\n"),
        "{before}"
    );
    first.kill9();

    let second = WharfProcess::start(&config);
    let listed = call_in(&second.url, &sid, "agentdocker:list_processes", json!({})).await;
    assert!(
        listed["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == pid && p["running"] == true),
        "the adopted session still has its process: {listed}"
    );
    let after = call_in(
        &second.url,
        &sid,
        "agentdocker:process_output",
        json!({"pid": pid, "offset": 0}),
    )
    .await;
    let text = after["output"].as_str().unwrap();
    assert!(
        text.starts_with(before["output"].as_str().unwrap()),
        "{after}"
    );
    assert!(after["next_offset"].as_u64() > before["next_offset"].as_u64());
    let killed = call_in(
        &second.url,
        &sid,
        "agentdocker:kill_process",
        json!({"pid": pid, "signal": "term"}),
    )
    .await;
    assert_eq!(killed["signal"], "term");
    let mut offset = after["next_offset"].clone();
    let mut done = Value::Null;
    for _ in 0..50 {
        done = call_in(
            &second.url,
            &sid,
            "agentdocker:process_output",
            json!({"pid": pid, "offset": offset, "wait_ms": 2000}),
        )
        .await;
        if done["finished"] == true {
            break;
        }
        offset = done["next_offset"].clone();
    }
    assert_eq!(
        (&done["finished"], &done["exit_code"]),
        (&json!(true), &json!(143)),
        "{done}"
    );
    // A pid that is not the session's: refused, not guessed.
    let reply: Value = reqwest::Client::new()
        .post(format!("{}/v1/call", second.url))
        .json(&json!({"tool": "agentdocker:process_output", "args": {"pid": 1}, "session_id": sid}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 4000, "{reply}");
    remove_backend_containers("agentdocker");
}

/// A command that writes a line a second for `n` seconds.
fn ticking(n: u32) -> String {
    format!("i=1; while [ $i -le {n} ]; do echo tick$i; i=$((i+1)); sleep 1; done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_client_reads_a_commands_output_as_it_is_written() {
    if !docker_ready() {
        return;
    }
    use futures::StreamExt;
    let h = start(vec![("streamrest", docker_provider())]).await;
    let session = h
        .post(
            "/v1/sessions",
            json!({"backend": "streamrest", "key": "ndjson"}),
        )
        .await;
    let sid = session.body["data"]["id"].as_str().unwrap().to_string();
    let begun = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/call", h.url))
        .header("accept", "application/x-ndjson")
        .json(&json!({"tool": "streamrest:run_command", "args": {"command": ticking(3)}, "session_id": sid}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let mut body = response.bytes_stream();
    let (mut buffer, mut lines) = (Vec::new(), Vec::new());
    while let Some(chunk) = body.next().await {
        buffer.extend_from_slice(&chunk.unwrap());
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Value = serde_json::from_slice(&buffer[..end]).unwrap();
            buffer.drain(..=end);
            lines.push((begun.elapsed(), line));
        }
    }
    let outputs: Vec<_> = lines
        .iter()
        .filter(|(_, l)| l.get("output").is_some())
        .collect();
    let text: String = outputs
        .iter()
        .map(|(_, l)| l["output"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "tick1\ntick2\ntick3\n", "{lines:?}");
    let (first_at, _) = outputs[0];
    let (end_at, last) = lines.last().unwrap();
    assert!(
        *first_at < Duration::from_millis(1500) && *end_at >= Duration::from_secs(2),
        "the first line came at {first_at:?}, the end at {end_at:?}"
    );
    assert_eq!(last["code"], 0, "{last}");
    assert_eq!(last["data"]["result"]["stdout"], "tick1\ntick2\ntick3\n");

    // Without the header: the plain envelope, as before.
    let plain = h
        .call_in(
            &sid,
            "streamrest:run_command",
            json!({"command": "echo once"}),
        )
        .await;
    assert_eq!(plain.body["data"]["result"]["stdout"], "once\n");
    remove_backend_containers("streamrest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_sees_a_commands_output_as_progress_before_the_result() {
    if !docker_ready() {
        return;
    }
    let venv = tokio::task::spawn_blocking(mcp_sdk).await.expect("join");
    let h = start(vec![("streammcp", docker_provider())]).await;
    let script = repo_root().join("tests/fixtures/python/mcp_stream.py");
    let url = format!("{}/mcp", h.url);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(url)
            .arg("streammcp_run_command")
            .arg(ticking(5))
            .output()
            .expect("python runs")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(run["is_error"], false, "{run}");
    assert_eq!(
        run["result"]["stdout"],
        "tick1\ntick2\ntick3\ntick4\ntick5\n"
    );
    let result_at = run["result_at"].as_f64().unwrap();
    let ticks: Vec<(f64, String)> = run["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let message = p[2].as_str()?;
            message
                .starts_with("tick")
                .then(|| (p[0].as_f64().unwrap(), message.to_string()))
        })
        .collect();
    let texts: Vec<&str> = ticks.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        texts,
        ["tick1\n", "tick2\n", "tick3\n", "tick4\n", "tick5\n"],
        "{run}"
    );
    assert!(ticks[0].0 < 1.5 && result_at >= 4.0, "{run}");
    assert!(
        ticks[3].0 < result_at - 0.5,
        "output arrived while the command ran: {run}"
    );
    eprintln!(
        "first output as MCP progress after {:.1} ms",
        ticks[0].0 * 1e3
    );
    remove_backend_containers("streammcp");
}

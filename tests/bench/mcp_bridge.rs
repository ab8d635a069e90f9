//! Bridged MCP servers (issue 40). Remote: `tools/call` of the demo server's `echo` straight
//! to the server (the official Python SDK's server over streamable HTTP), and the same call
//! through Wharf's `mcp-bridge` over MCP and over REST, with one raw keep-alive client
//! each, sequential calls, rounds interleaved so drift hits both alike. Stdio: the same tool
//! called by the SDK's own stdio client on the server as a local process and in a
//! `docker run -i` container of the same image, against the bridge running it in its own
//! container through the sandbox agent; in one run.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::mcp_servers::{
    MCP_IMAGE, McpServer, bridge, mcp_server_image, stdio_bridge,
};
use wharf_integration_tests::python::{mcp_sdk, repo_root};
use wharf_integration_tests::raw_mcp::{RawMcpSession, keep_alive_client};
use wharf_integration_tests::start;

fn p50(samples: &mut [f64]) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}

async fn mcp_calls(session: &RawMcpSession, tool: &str, until: Instant, out: &mut Vec<f64>) {
    let mut n = out.len() as u64 + 1;
    while Instant::now() < until {
        let started = Instant::now();
        let (status, _, text) = session.call(n, tool, json!({"text": "hi"}), None).await;
        out.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(
            status == 200 && text.contains("hi"),
            "{tool}: {status} {text}"
        );
        n += 1;
    }
}

/// The rows: p50 of each path and what the bridge adds.
pub async fn run_bridge(seconds: u32) -> Vec<(String, String)> {
    let server = McpServer::demo().await;
    let h = start(vec![("bridge", bridge(&server))]).await;
    let direct = RawMcpSession::open(&server.url()).await;
    let wharf = RawMcpSession::open(&format!("{}/mcp", h.url)).await;
    let rest = keep_alive_client();
    let rest_url = format!("{}/v1/call", h.url);
    let (mut d, mut m, mut r) = (Vec::new(), Vec::new(), Vec::new());
    // Warm both paths (the bridge's instances open their MCP sessions).
    mcp_calls(
        &direct,
        "echo",
        Instant::now() + Duration::from_millis(300),
        &mut Vec::new(),
    )
    .await;
    mcp_calls(
        &wharf,
        "bridge_echo",
        Instant::now() + Duration::from_millis(300),
        &mut Vec::new(),
    )
    .await;
    let round = Duration::from_secs_f64(f64::from(seconds.max(3)) / 3.0);
    for _ in 0..3 {
        mcp_calls(&direct, "echo", Instant::now() + round, &mut d).await;
        mcp_calls(&wharf, "bridge_echo", Instant::now() + round, &mut m).await;
        let until = Instant::now() + round;
        while Instant::now() < until {
            let started = Instant::now();
            let reply: serde_json::Value = rest
                .post(&rest_url)
                .json(&json!({"tool": "bridge:echo", "args": {"text": "hi"}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(reply["code"], 0, "{reply}");
        }
    }
    let (d50, m50, r50) = (p50(&mut d), p50(&mut m), p50(&mut r));
    vec![
        (
            "MCP server called directly (FastMCP, streamable HTTP), tools/call p50".into(),
            format!("{d50:.2} ms ({} calls)", d.len()),
        ),
        (
            "the same server bridged, through Wharf's MCP, tools/call p50".into(),
            format!(
                "{m50:.2} ms ({} calls): +{:.2} ms, {:.2}x",
                m.len(),
                m50 - d50,
                m50 / d50
            ),
        ),
        (
            "the same server bridged, through Wharf's REST /v1/call p50".into(),
            format!("{r50:.2} ms ({} calls): +{:.2} ms", r.len(), r50 - d50),
        ),
    ]
}

/// The SDK's stdio client calling `echo` for `secs` seconds after 20 warm-up calls; prints
/// the p50 in ms and the number of calls.
const SDK_STDIO_CLIENT: &str = r#"
import asyncio, sys, time, statistics
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    secs = float(sys.argv[1]); command = sys.argv[2:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(20):
                await s.call_tool("echo", {"text": "hi"})
            took = []
            end = time.monotonic() + secs
            while time.monotonic() < end:
                a = time.perf_counter()
                out = await s.call_tool("echo", {"text": "hi"})
                took.append(time.perf_counter() - a)
                assert not out.is_error
            print(f"{statistics.median(took) * 1000:.3f} {len(took)}")

asyncio.run(main())
"#;

/// p50 ms and calls of the SDK's stdio client on `server` (an argv).
fn sdk_stdio(seconds: u32, server: &[String]) -> (f64, usize) {
    let venv = mcp_sdk();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, SDK_STDIO_CLIENT).unwrap();
    let out = std::process::Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(seconds.to_string())
        .args(server)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let p50 = words.next().and_then(|w| w.parse().ok());
    let calls = words.next().and_then(|w| w.parse().ok());
    match (p50, calls) {
        (Some(p50), Some(calls)) => (p50, calls),
        _ => panic!(
            "the SDK client failed: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// The stdio rows.
pub async fn run_bridge_stdio(seconds: u32) -> Vec<(String, String)> {
    tokio::task::spawn_blocking(mcp_server_image).await.unwrap();
    let demo = ["/usr/bin/python3", "/srv/demo_server.py", "--stdio"];
    let h = start(vec![("stdio-bench", stdio_bridge(&demo, ""))]).await;
    let wharf = RawMcpSession::open(&format!("{}/mcp", h.url)).await;
    mcp_calls(
        &wharf,
        "stdio-bench_echo",
        Instant::now() + Duration::from_millis(500),
        &mut Vec::new(),
    )
    .await;
    let round = seconds.max(3) / 3;
    let local: Vec<String> = [
        mcp_sdk().join("bin/python").display().to_string(),
        repo_root()
            .join("tests/fixtures/mcp_servers/demo_server.py")
            .display()
            .to_string(),
        "--stdio".into(),
    ]
    .into();
    let mut docker: Vec<String> = [
        "docker",
        "run",
        "-i",
        "--rm",
        "--network",
        "none",
        MCP_IMAGE,
    ]
    .map(String::from)
    .into();
    docker.extend(demo.map(String::from));
    let (mut direct, mut in_docker, mut bridged) = (Vec::new(), Vec::new(), Vec::new());
    let mut counts = (0, 0);
    for _ in 0..3 {
        let (p50, n) = {
            let local = local.clone();
            tokio::task::spawn_blocking(move || sdk_stdio(round, &local))
                .await
                .unwrap()
        };
        direct.push(p50);
        counts.0 += n;
        let (p50, n) = {
            let docker = docker.clone();
            tokio::task::spawn_blocking(move || sdk_stdio(round, &docker))
                .await
                .unwrap()
        };
        in_docker.push(p50);
        counts.1 += n;
        let until = Instant::now() + Duration::from_secs(u64::from(round));
        mcp_calls(&wharf, "stdio-bench_echo", until, &mut bridged).await;
    }
    wharf_integration_tests::remove_backend_containers("stdio-bench");
    let (d50, k50, b50) = (p50(&mut direct), p50(&mut in_docker), p50(&mut bridged));
    vec![
        (
            "stdio MCP server, the SDK's stdio client on a local process, tools/call p50 (median of 3 rounds)".into(),
            format!("{d50:.2} ms ({} calls)", counts.0),
        ),
        (
            "the same, server in `docker run -i` of the same image".into(),
            format!("{k50:.2} ms ({} calls)", counts.1),
        ),
        (
            "the same server bridged over stdio in its own container, through Wharf's MCP, tools/call p50".into(),
            format!("{b50:.2} ms ({} calls): {:.2}x the local process, {:.2}x docker run -i", bridged.len(), b50 / d50, b50 / k50),
        ),
    ]
}

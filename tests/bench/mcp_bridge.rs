//! A bridged MCP server (issue 40): `tools/call` of the demo server's `echo` straight to the
//! server (the official Python SDK's FastMCP over streamable HTTP), and the same call
//! through Wharf's `mcp-bridge` over MCP and over REST, with one raw keep-alive client
//! each, sequential calls, rounds interleaved so drift hits both alike; in one run.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::mcp_servers::{McpServer, bridge};
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

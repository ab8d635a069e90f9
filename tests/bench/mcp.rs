//! MCP `tools/call` over streamable HTTP with a raw keep-alive client (one connection per
//! MCP session, sequential calls, as wrk or `http.client` would), for one and eight
//! sessions; the same client over REST; and the Python SDK's own MCP server with the same
//! echo tool, in the same run.
//!
//! The Python server runs from the venv `scripts/bench` makes (`WHARF_BENCH_MCP_PYTHON`);
//! without it its rows are skipped.

use super::Proc;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROTOCOL: &str = "2025-06-18";

/// The Python SDK's server: one tool, `echo_say`, like Wharf's `echo:say`.
const PYTHON_SERVER: &str = r#"
import logging, sys
from mcp.server.mcpserver import MCPServer
port = int(sys.argv[1])
logging.disable(logging.INFO)
app = MCPServer("bench", log_level="WARNING")

@app.tool()
def echo_say(text: str, times: int = 1) -> str:
    """Echo the text back."""
    return text * times

app.run(transport="streamable-http", host="127.0.0.1", port=port)
"#;

/// Keep-alive, one connection: what a raw client does.
fn one_connection() -> reqwest::Client {
    reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap()
}

/// An MCP session on its own kept-alive connection.
struct Session {
    client: reqwest::Client,
    url: String,
    id: String,
}

impl Session {
    async fn open(url: &str) -> Session {
        let client = one_connection();
        let init = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "wharf-bench", "version": "0"}}}),
            )
            .send()
            .await
            .unwrap();
        assert!(init.status().is_success(), "initialize: {}", init.status());
        let id = init
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        let _ = init.bytes().await.unwrap();
        let session = Session {
            client,
            url: url.to_string(),
            id,
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!(initialized.status().is_success());
        session
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        self.client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn call(&self, n: u64) {
        let reply = self
            .post(json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "echo_say", "arguments": {"text": "hi"}}}))
            .await;
        let text = reply.text().await.unwrap();
        assert!(
            text.contains(r#""isError":false"#) || !text.contains("isError"),
            "{text}"
        );
    }
}

/// Calls/s over all clients and the median latency, `clients` at once for `seconds`.
async fn drive<F, Fut>(clients: usize, seconds: u32, make: F) -> (f64, f64)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Box<dyn FnMut(u64) -> CallFuture + Send>>,
{
    let until = Instant::now() + Duration::from_secs(u64::from(seconds));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mut call = make().await;
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            let mut n = 1;
            while Instant::now() < until {
                let started = Instant::now();
                call(n).await;
                took.push(started.elapsed().as_secs_f64() * 1e3);
                n += 1;
            }
            took
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = all.get(all.len() / 2).copied().unwrap_or(0.0);
    (all.len() as f64 / f64::from(seconds), p50)
}

type CallFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

async fn mcp(url: &str, clients: usize, seconds: u32) -> (f64, f64) {
    drive(clients, seconds, move || async move {
        let session = std::sync::Arc::new(Session::open(url).await);
        Box::new(move |n| {
            let session = session.clone();
            Box::pin(async move { session.call(n).await }) as CallFuture
        }) as Box<dyn FnMut(u64) -> CallFuture + Send>
    })
    .await
}

async fn rest(url: &str, clients: usize, seconds: u32) -> (f64, f64) {
    drive(clients, seconds, move || async move {
        let (client, url) = (one_connection(), format!("{url}/v1/call"));
        Box::new(move |_| {
            let (client, url) = (client.clone(), url.clone());
            Box::pin(async move {
                let reply: Value = client
                    .post(&url)
                    .json(&json!({"tool": "echo:say", "args": {"text": "hi"}}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(reply["code"], 0, "{reply}");
            }) as CallFuture
        }) as Box<dyn FnMut(u64) -> CallFuture + Send>
    })
    .await
}

fn start_python(python: &str) -> Option<(Proc, String)> {
    let port = super::free_port();
    let script = std::env::temp_dir().join(format!("wharf-bench-mcp-{}.py", std::process::id()));
    std::fs::write(&script, PYTHON_SERVER).ok()?;
    let child = Command::new(python)
        .arg(&script)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let proc = Proc(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((proc, format!("http://127.0.0.1:{port}/mcp")))
}

fn row(rows: &mut Vec<(String, String)>, what: String, (rps, p50): (f64, f64)) {
    rows.push((what, format!("{rps:.0} calls/s, p50 {p50:.3} ms")));
}

/// The MCP rows against the Wharf at `url`; returns the rows and the targets' ratios
/// (MCP / Python per session, MCP / REST per session).
pub async fn run(url: &str, seconds: u32) -> (Vec<(String, String)>, f64, f64) {
    let mut rows = Vec::new();
    let mcp_url = format!("{url}/mcp");
    let mut one = (0.0, 0.0);
    let mut rest_one = (0.0, 0.0);
    for clients in [1, 8] {
        let m = mcp(&mcp_url, clients, seconds).await;
        let r = rest(url, clients, seconds).await;
        row(
            &mut rows,
            format!("MCP tools/call echo_say, keep-alive, {clients} session(s)"),
            m,
        );
        row(
            &mut rows,
            format!("REST echo:say, same client, {clients} connection(s)"),
            r,
        );
        rows.push((
            format!("ratio MCP / REST, {clients} session(s)"),
            format!("{:.2}x", m.0 / r.0),
        ));
        if clients == 1 {
            (one, rest_one) = (m, r);
        }
    }
    let mut vs_python = f64::NAN;
    match std::env::var("WHARF_BENCH_MCP_PYTHON")
        .ok()
        .and_then(|python| start_python(&python))
    {
        Some((_python, py_url)) => {
            for clients in [1, 8] {
                let p = mcp(&py_url, clients, seconds).await;
                row(
                    &mut rows,
                    format!("Python SDK MCP server, same tool, {clients} session(s)"),
                    p,
                );
                if clients == 1 {
                    vs_python = one.0 / p.0;
                    rows.push((
                        "ratio Wharf MCP / Python SDK MCP, 1 session".into(),
                        format!("{vs_python:.1}x"),
                    ));
                }
            }
        }
        None => println!(
            "note: no Python SDK MCP server (WHARF_BENCH_MCP_PYTHON unset or it did not start); its rows are skipped\n"
        ),
    }
    (rows, vs_python, one.0 / rest_one.0)
}

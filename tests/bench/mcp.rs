//! MCP `tools/call` over streamable HTTP with a raw keep-alive client (one connection per
//! MCP session, sequential calls, as wrk or `http.client` would), for one and eight
//! sessions; the same client over REST; and the Python SDK's own MCP server with the same
//! echo tool, in the same run.
//!
//! The Python server runs from the venv `scripts/bench` makes (`WHARF_BENCH_MCP_PYTHON`);
//! without it its rows are skipped.

use super::Proc;
use super::wrk_session::{self, Target};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wharf_integration_tests::raw_mcp::{RawMcpSession, keep_alive_client};

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

/// One `echo_say` call of `session`, which must not fail.
async fn call(session: &RawMcpSession, n: u64) {
    let (_, _, text) = session
        .call(n, "echo_say", json!({"text": "hi"}), None)
        .await;
    assert!(
        text.contains(r#""isError":false"#) || !text.contains("isError"),
        "{text}"
    );
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
        let session = std::sync::Arc::new(RawMcpSession::open(url).await);
        Box::new(move |n| {
            let session = session.clone();
            Box::pin(async move { call(&session, n).await }) as CallFuture
        }) as Box<dyn FnMut(u64) -> CallFuture + Send>
    })
    .await
}

/// `tools/call` in the 2026-07-28 revision: no MCP session, each request carrying its
/// protocol version, the standard headers and the per-request `_meta`, on one kept-alive
/// connection per client.
async fn modern(mcp_url: &str, clients: usize, seconds: u32) -> (f64, f64) {
    drive(clients, seconds, move || async move {
        let client = keep_alive_client();
        let url = mcp_url.to_string();
        Box::new(move |n| {
            let (client, url) = (client.clone(), url.clone());
            Box::pin(async move {
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                    "name": "echo_say", "arguments": {"text": "hi"},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}});
                let text = client
                    .post(&url)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", "echo_say")
                    .json(&body)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                assert!(text.contains(r#""isError":false"#), "{text}");
            }) as CallFuture
        }) as Box<dyn FnMut(u64) -> CallFuture + Send>
    })
    .await
}

async fn rest(url: &str, clients: usize, seconds: u32) -> (f64, f64) {
    drive(clients, seconds, move || async move {
        let (client, url) = (keep_alive_client(), format!("{url}/v1/call"));
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

/// How many turns the one-session rows take.
const ROUNDS: usize = 3;

/// The median of `xs` (the upper one of an even count).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The MCP rows against the Wharf at `url`; returns the rows and the targets' ratios
/// (MCP / Python per session, MCP / REST per session).
///
/// One session: Wharf's MCP, the same client over REST and the Python SDK's server take
/// turns, [`ROUNDS`] times, each for `seconds`. This VM's speed drifts by tens of percent
/// within a minute, so each round's ratios compare neighbours; the rows give the medians.
pub async fn run(url: &str, seconds: u32) -> (Vec<(String, String)>, Ratios) {
    let mut rows = Vec::new();
    let mcp_url = format!("{url}/mcp");
    let python = std::env::var("WHARF_BENCH_MCP_PYTHON")
        .ok()
        .and_then(|python| start_python(&python));
    if python.is_none() {
        println!(
            "note: no Python SDK MCP server (WHARF_BENCH_MCP_PYTHON unset or it did not start); its rows are skipped\n"
        );
    }
    let (mut reqwest, mut wrk) = (Turns::default(), Turns::default());
    for _ in 0..ROUNDS {
        reqwest.mcp.push(mcp(&mcp_url, 1, seconds).await);
        reqwest.rest.push(rest(url, 1, seconds).await);
        if let Some((_, py_url)) = &python {
            reqwest.python.push(mcp(py_url, 1, seconds).await);
        }
        wrk.mcp.push(wrk_mcp(&mcp_url, seconds).await);
        wrk.rest
            .push(wrk_session::drive(&Target::Rest { url }, seconds));
        if let Some((_, py_url)) = &python {
            wrk.python.push(wrk_mcp(py_url, seconds).await);
        }
    }
    let (vs_rest, vs_python) = one_session_rows(&mut rows, "reqwest", &reqwest);
    let (_, wrk_vs_python) = one_session_rows(&mut rows, "wrk", &wrk);

    // The 2026-07-28 revision (stateless) against REST, alternating, and the Python SDK's
    // server on the same revision.
    let (mut modern_turns, mut rest_turns, mut python_modern) =
        (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        modern_turns.push(modern(&mcp_url, 1, seconds).await);
        rest_turns.push(rest(url, 1, seconds).await);
        if let Some((_, py_url)) = &python {
            python_modern.push(modern(py_url, 1, seconds).await);
        }
    }
    let rate = |xs: &[(f64, f64)]| median(xs.iter().map(|x| x.0).collect());
    let p50 = |xs: &[(f64, f64)]| median(xs.iter().map(|x| x.1).collect());
    row(
        &mut rows,
        format!(
            "MCP 2026-07-28 (no session) tools/call echo_say, reqwest, 1 connection (median of {ROUNDS} turns)"
        ),
        (rate(&modern_turns), p50(&modern_turns)),
    );
    row(
        &mut rows,
        "REST echo:say, reqwest, 1 connection (the same turns)".into(),
        (rate(&rest_turns), p50(&rest_turns)),
    );
    rows.push((
        "ratio MCP 2026-07-28 / REST (median of the turns' ratios)".into(),
        format!(
            "{:.2}x",
            median(
                modern_turns
                    .iter()
                    .zip(&rest_turns)
                    .map(|(m, r)| m.0 / r.0)
                    .collect()
            )
        ),
    ));
    if !python_modern.is_empty() {
        row(
            &mut rows,
            "Python SDK MCP server, 2026-07-28, same tool, reqwest, 1 connection".into(),
            (rate(&python_modern), p50(&python_modern)),
        );
    }

    let m8 = mcp(&mcp_url, 8, seconds).await;
    let r8 = rest(url, 8, seconds).await;
    row(
        &mut rows,
        "MCP tools/call echo_say, reqwest, 8 sessions".into(),
        m8,
    );
    row(
        &mut rows,
        "REST echo:say, reqwest, 8 connections".into(),
        r8,
    );
    rows.push((
        "ratio MCP / REST, 8 sessions".into(),
        format!("{:.2}x", m8.0 / r8.0),
    ));
    if let Some((_, py_url)) = &python {
        let p8 = mcp(py_url, 8, seconds).await;
        row(
            &mut rows,
            "Python SDK MCP server, same tool, reqwest, 8 sessions".into(),
            p8,
        );
    }
    (
        rows,
        Ratios {
            vs_python,
            wrk_vs_python,
            vs_rest,
        },
    )
}

/// One client's one-session figures, one per turn: Wharf's MCP, Wharf's REST and the
/// Python SDK's server (empty when it did not start).
#[derive(Default)]
struct Turns {
    mcp: Vec<(f64, f64)>,
    rest: Vec<(f64, f64)>,
    python: Vec<(f64, f64)>,
}

/// The one-session rows of the client named `client`: the medians of its turns, and the
/// ratios MCP / REST and MCP / Python (NaN without Python), each the median of the turns'
/// own ratios.
fn one_session_rows(rows: &mut Vec<(String, String)>, client: &str, turns: &Turns) -> (f64, f64) {
    let rate = |xs: &[(f64, f64)]| median(xs.iter().map(|x| x.0).collect());
    let p50 = |xs: &[(f64, f64)]| median(xs.iter().map(|x| x.1).collect());
    let per_round = |a: &[(f64, f64)], b: &[(f64, f64)]| {
        median(a.iter().zip(b).map(|(a, b)| a.0 / b.0).collect())
    };
    let measured = |rows: &mut Vec<(String, String)>, label: String, xs: &[(f64, f64)]| {
        row(rows, label, (rate(xs), p50(xs)));
    };
    let Turns { mcp, rest, python } = turns;
    measured(
        rows,
        format!("MCP tools/call echo_say, {client}, 1 session (median of {ROUNDS} turns)"),
        mcp,
    );
    measured(rows, format!("REST echo:say, {client}, 1 connection"), rest);
    let vs_rest = per_round(mcp, rest);
    rows.push((
        format!("ratio MCP / REST, {client}, 1 session (median of the turns' ratios)"),
        format!("{vs_rest:.2}x"),
    ));
    if python.is_empty() {
        return (vs_rest, f64::NAN);
    }
    measured(
        rows,
        format!("Python SDK MCP server, same tool, {client}, 1 session"),
        python,
    );
    let vs_python = per_round(mcp, python);
    rows.push((
        format!(
            "ratio Wharf MCP / Python SDK MCP, {client}, 1 session (median of the turns' ratios)"
        ),
        format!("{vs_python:.1}x"),
    ));
    (vs_rest, vs_python)
}

/// The one-session ratios the targets name (NaN where the Python server did not run).
pub struct Ratios {
    /// Wharf's MCP / the Python SDK's server, the reqwest client.
    pub vs_python: f64,
    /// The same, wrk as the client.
    pub wrk_vs_python: f64,
    /// Wharf's MCP / Wharf's REST, the reqwest client.
    pub vs_rest: f64,
}

/// wrk on one connection in a fresh MCP session at `mcp_url` (opened and initialized by
/// the raw client, whose own connection then idles).
async fn wrk_mcp(mcp_url: &str, seconds: u32) -> (f64, f64) {
    let session = RawMcpSession::open(mcp_url).await;
    let target = Target::Mcp {
        url: mcp_url,
        session: &session.id,
    };
    wrk_session::drive(&target, seconds)
}

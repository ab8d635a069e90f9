//! The quotas benchmark (issue 11), one table in one run:
//!
//! - the cost of the quota checks: `echo:ping` over REST at concurrency 32 (wrk), on a host
//!   with no `[quotas]` and on one whose every call passes a rate and a concurrency check
//!   (limits far above the load), alternated, three rounds each;
//! - noisy neighbour on the pool (the target): tenant B's p99 over REST (sequential calls of
//!   a tool that holds its instance 5 ms, `pool_max = 4`) alone, then while tenant A floods
//!   the same backend at concurrency 64;
//! - noisy neighbour on the CPU: the same with a cheap CPU-bound tool (`m:busy`), where
//!   what A takes is the machine's cores rather than the backend's instances.
//!
//! Run with `scripts/bench` (it installs wrk if missing).

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use wharf::config::{QuotaConfig, ServerConfig, TokenConfig, TokenScope};
use wharf_integration_tests::{TestHost, bundled, start_with};

/// Runs wrk (POST `body`) and returns (requests/s, p99 ms); every answer must be a 2xx.
fn wrk(url: &str, body: &str, connections: u32, seconds: u32) -> (f64, f64) {
    let (rps, p99, non_2xx) = wrk_as(None, url, body, connections, seconds);
    assert_eq!(non_2xx, 0.0, "non-2xx replies during the run");
    (rps, p99)
}

/// Runs wrk (POST `body`, with `token` as the bearer when given): (requests/s, p99 ms,
/// non-2xx answers).
fn wrk_as(
    token: Option<&str>,
    url: &str,
    body: &str,
    connections: u32,
    seconds: u32,
) -> (f64, f64, f64) {
    let auth = token.map_or(String::new(), |t| {
        format!("wrk.headers[\"Authorization\"] = \"Bearer {t}\"\n")
    });
    let lua = format!(
        "{auth}wrk.method = \"POST\"\nwrk.body = '{body}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         done = function(summary, latency, requests)\n  io.write(string.format(\"WHARF %f %f %d\\n\", \
         summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000, summary.errors.status))\nend\n"
    );
    let (v, _) = wharf_integration_tests::wrk::run(&lua, url, connections, seconds);
    (v[0], v[1], v[2])
}

fn token(name: &str) -> TokenConfig {
    TokenConfig {
        name: name.into(),
        value: Some(format!("secret-{name}")),
        value_file: None,
        scopes: vec![TokenScope::Read, TokenScope::Call],
        backends: None,
        tools: None,
    }
}

async fn call(client: &reqwest::Client, host: &TestHost, who: &str, args: &Value) -> u64 {
    call_tool(client, host, who, "m:busy", args).await
}

/// Calls `tool` as tenant `who`; the answer's code.
async fn call_tool(
    client: &reqwest::Client,
    host: &TestHost,
    who: &str,
    tool: &str,
    args: &Value,
) -> u64 {
    let reply: Value = client
        .post(format!("{}/v1/call", host.url))
        .bearer_auth(format!("secret-{who}"))
        .json(&json!({ "tool": tool, "args": args }))
        .send()
        .await
        .expect("call")
        .json()
        .await
        .expect("json");
    reply["code"].as_u64().unwrap_or(u64::MAX)
}

fn p99(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(|a, b| a.total_cmp(b));
    ms[((ms.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)]
}

/// A host with tenants `a` and `b`, `quotas` (a `[quotas]` table), and the backend `m`
/// (misbehaving) with a pool of four instances.
async fn two_tenants(quotas: &str) -> Arc<TestHost> {
    let mut backend = bundled("misbehaving");
    backend.limits.pool_min = 4;
    backend.limits.pool_max = 4;
    let quotas = toml::from_str::<QuotaConfig>(quotas).expect("quotas");
    Arc::new(
        start_with(vec![("m", backend)], move |s: &mut ServerConfig| {
            s.auth.tokens = vec![token("a"), token("b")];
            s.quotas = quotas;
        })
        .await,
    )
}

async fn b_latencies(host: &TestHost, n: usize) -> Vec<f64> {
    let client = reqwest::Client::new();
    let args = json!({ "iterations": 20_000 });
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        assert_eq!(call(&client, host, "b", &args).await, 0);
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    out
}

/// Tenant B's p99 alone, then while tenant A floods from another process (wrk, 64
/// connections, the same call): the neighbour is another client, as in production.
async fn noisy_neighbour_from_wrk() -> (f64, f64, f64) {
    let host = two_tenants("").await;
    b_latencies(&host, 50).await;
    let alone = p99(b_latencies(&host, 500).await);
    let url = format!("{}/v1/call", host.url);
    let flood = tokio::task::spawn_blocking(move || {
        wrk_as(
            Some("secret-a"),
            &url,
            r#"{"tool":"m:busy","args":{"iterations":20000}}"#,
            64,
            6,
        )
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let flooded = p99(b_latencies(&host, 500).await);
    let (a_rps, _, _) = flood.await.expect("wrk flood");
    (alone, flooded, a_rps)
}

/// Tenant B's p99 alone, then while tenant A floods at concurrency 64 under an operator's
/// quota (`concurrent_calls = 2` for A), A's clients doing what an HTTP client should with
/// a 429: wait `Retry-After` before trying again.
async fn noisy_neighbour_under_quota() -> (f64, f64, usize) {
    let host = two_tenants("[tokens.a]\nconcurrent_calls = 2\n").await;
    b_latencies(&host, 50).await;
    let alone = p99(b_latencies(&host, 500).await);
    let stop = Arc::new(AtomicBool::new(false));
    let a_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood: Vec<_> = (0..64)
        .map(|_| {
            let (host, stop, done) = (host.clone(), stop.clone(), a_done.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let args = json!({ "iterations": 20_000 });
                while !stop.load(Ordering::Relaxed) {
                    let reply = client
                        .post(format!("{}/v1/call", host.url))
                        .bearer_auth("secret-a")
                        .json(&json!({ "tool": "m:busy", "args": args }))
                        .send()
                        .await
                        .expect("call");
                    let wait = reply
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    let _ = reply.bytes().await;
                    match wait {
                        Some(seconds) => {
                            tokio::time::sleep(std::time::Duration::from_secs(seconds)).await
                        }
                        None => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let before = a_done.load(Ordering::Relaxed);
    let flooded = p99(b_latencies(&host, 500).await);
    let a_served = a_done.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        let _ = f.await;
    }
    (alone, flooded, a_served)
}

async fn noisy_neighbour() -> (f64, f64) {
    let host = two_tenants("").await;
    b_latencies(&host, 50).await;
    let alone = p99(b_latencies(&host, 500).await);
    let stop = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..64)
        .map(|_| {
            let (host, stop) = (host.clone(), stop.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let args = json!({ "iterations": 20_000 });
                while !stop.load(Ordering::Relaxed) {
                    call(&client, &host, "a", &args).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let flooded = p99(b_latencies(&host, 500).await);
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        let _ = f.await;
    }
    (alone, flooded)
}

/// A loopback server whose `/slow` answers after 5 ms: a tool that fetches it holds its
/// instance for that long without using the CPU.
async fn slow_server() -> String {
    let app = axum::Router::new().route(
        "/slow",
        axum::routing::get(|| async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            "ok"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/slow", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// Tenant B's p99 alone, then while tenant A floods at concurrency 64, when the pool of four
/// instances (not the CPU) is what they contend for: the tool (`probe:fetch` of a loopback
/// URL answering after 5 ms) holds its instance while it waits. No `[quotas]`: the fair gate
/// alone serves the waiting tenants in turn.
async fn noisy_neighbour_on_the_pool() -> (f64, f64, usize) {
    let url = slow_server().await;
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .unwrap_or_default()
        .to_string();
    let mut backend = bundled("probe");
    backend.limits.pool_min = 4;
    backend.limits.pool_max = 4;
    backend.limits.queue_timeout_ms = 60_000;
    backend.grants.http_hosts = vec![format!("127.0.0.1:{port}")];
    backend.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    let host = Arc::new(
        start_with(vec![("p", backend)], |s: &mut ServerConfig| {
            s.auth.tokens = vec![token("a"), token("b")];
        })
        .await,
    );
    let b_run = |n: usize| {
        let (host, url) = (host.clone(), url.clone());
        async move {
            let client = reqwest::Client::new();
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let t = Instant::now();
                let args = json!({ "url": url });
                assert_eq!(call_tool(&client, &host, "b", "p:fetch", &args).await, 0);
                out.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            out
        }
    };
    b_run(20).await;
    let alone = p99(b_run(300).await);
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood: Vec<_> = (0..64)
        .map(|_| {
            let (host, stop, served, url) =
                (host.clone(), stop.clone(), served.clone(), url.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                while !stop.load(Ordering::Relaxed) {
                    if call_tool(&client, &host, "a", "p:fetch", &json!({ "url": url })).await == 0
                    {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let flooded = p99(b_run(300).await);
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        let _ = f.await;
    }
    (alone, flooded, served.load(Ordering::Relaxed))
}

#[tokio::main]
async fn main() {
    let plain = start_with(vec![("echo", bundled("echo"))], |_| {}).await;
    let checked = start_with(vec![("echo", bundled("echo"))], |s| {
        s.quotas = toml::from_str::<QuotaConfig>(
            "[default]\ncalls_per_second = 100000000\nconcurrent_calls = 100000\n",
        )
        .expect("quotas");
    })
    .await;
    let body = r#"{"tool":"echo:ping","args":{}}"#;
    let (mut plain_rps, mut checked_rps) = (Vec::new(), Vec::new());
    let (plain_url, checked_url) = (
        format!("{}/v1/call", plain.url),
        format!("{}/v1/call", checked.url),
    );
    let rows = tokio::task::spawn_blocking(move || {
        wrk(&plain_url, body, 32, 2);
        wrk(&checked_url, body, 32, 2);
        for _ in 0..3 {
            plain_rps.push(wrk(&plain_url, body, 32, 5));
            checked_rps.push(wrk(&checked_url, body, 32, 5));
        }
        (plain_rps, checked_rps)
    })
    .await
    .expect("wrk rounds");
    let mean = |v: &[(f64, f64)]| v.iter().map(|r| r.0).sum::<f64>() / v.len() as f64;
    let (p, c) = (mean(&rows.0), mean(&rows.1));
    drop((plain, checked));
    let (alone, flooded) = noisy_neighbour().await;
    let (alone_w, flooded_w, a_rps) = noisy_neighbour_from_wrk().await;
    let (alone_q, flooded_q, a_served) = noisy_neighbour_under_quota().await;
    let (alone_p, flooded_p, a_pool) = noisy_neighbour_on_the_pool().await;
    println!("| quotas measure | figure |\n|---|---|");
    println!("| REST echo:ping, concurrency 32, no quotas (mean of 3 x 5 s) | {p:.0} calls/s |");
    println!("| REST echo:ping, concurrency 32, rate + concurrency checked | {c:.0} calls/s |");
    println!("| ratio checked / unchecked | {:.2}x |", c / p);
    println!("| tenant B p99, alone (500 sequential calls, pool_max 4) | {alone:.2} ms |");
    println!("| tenant B p99, tenant A flooding at concurrency 64 | {flooded:.2} ms |");
    println!("| ratio flooded / alone | {:.2}x |", flooded / alone);
    println!("| tenant B p99, alone (flood from wrk run) | {alone_w:.2} ms |");
    println!(
        "| tenant B p99, tenant A flooding from wrk at concurrency 64 ({a_rps:.0} calls/s) | {flooded_w:.2} ms |"
    );
    println!(
        "| ratio flooded (wrk) / alone | {:.2}x |",
        flooded_w / alone_w
    );
    println!("| tenant B p99, alone (quota run) | {alone_q:.2} ms |");
    println!(
        "| tenant B p99, A flooding at concurrency 64 under `concurrent_calls = 2`, honouring Retry-After ({a_served} of A's calls served meanwhile) | {flooded_q:.2} ms |"
    );
    println!(
        "| ratio flooded under quota / alone | {:.2}x |",
        flooded_q / alone_q
    );
    println!(
        "| tenant B p99, alone, a tool holding its instance 5 ms (pool_max 4) | {alone_p:.2} ms |"
    );
    println!(
        "| tenant B p99, the same while A floods it at concurrency 64, no quotas ({a_pool} of A's calls served meanwhile) | {flooded_p:.2} ms |"
    );
    println!(
        "| ratio flooded on the pool / alone | {:.2}x |",
        flooded_p / alone_p
    );
    let met = |ok: bool| if ok { "met" } else { "not met" };
    println!(
        "\ntargets: quota checks cost <= 5% of throughput ({}), B's p99 while A floods the pool <= 2x alone ({}); \
         with a CPU-bound tool, B's p99 under a quota'd flood {:.1}x alone (not a pool effect)",
        met(c / p >= 0.95),
        met(flooded_p / alone_p <= 2.0),
        flooded_q / alone_q,
    );
}

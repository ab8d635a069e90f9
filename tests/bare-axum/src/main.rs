//! The baseline of the benchmark (`tests/bench/main.rs`): one axum route with the JSON-in,
//! JSON-out shape of a tool call and no Wasm. It is served the way `wharf serve` is: its
//! own process, tokio's multi-thread runtime, and the host crate's optimisation level (the
//! workspace `Cargo.toml`), so the benchmark's ratios compare the host with the framework
//! under it and nothing else.
//!
//! Usage: `bare-axum PORT` (listens on 127.0.0.1).

use axum::body::Bytes;
use axum::routing::{get, post};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1).map(|p| p.parse()) {
        Some(Ok(port)) => port,
        _ => {
            eprintln!("usage: bare-axum PORT");
            std::process::exit(2);
        }
    };
    let app = axum::Router::new()
        .route("/readyz", get(|| async { "ok" }))
        .route("/v1/call", post(call));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await
}

/// Parses the body and answers an envelope naming the tool, as a tool call would.
async fn call(body: Bytes) -> axum::Json<Value> {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    axum::Json(json!({
        "code": 0,
        "message": "ok",
        "data": { "result": "pong", "tool": request["tool"] },
    }))
}

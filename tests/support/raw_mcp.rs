//! An MCP session over raw streamable HTTP on one kept-alive connection, as agents' own
//! clients (or wrk, or Python's `http.client`) send it rather than an MCP SDK: the tests'
//! and the benchmark's.

use serde_json::{Value, json};

/// The protocol version the session asks for.
pub const PROTOCOL: &str = "2025-06-18";

/// HTTP/1.1, one kept-alive connection.
pub fn keep_alive_client() -> reqwest::Client {
    reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap()
}

/// An initialized MCP session on its own kept-alive connection.
pub struct RawMcpSession {
    /// The connection's client.
    pub client: reqwest::Client,
    /// The MCP endpoint.
    pub url: String,
    /// The `Mcp-Session-Id` the server handed out.
    pub id: String,
}

/// A reply: its HTTP status, `Content-Type` and body.
pub type Reply = (u16, String, String);

impl RawMcpSession {
    /// `initialize` (answered 200 with a session id) and `notifications/initialized`
    /// (answered 202) at `url`, the server's MCP endpoint.
    pub async fn open(url: &str) -> RawMcpSession {
        let client = keep_alive_client();
        let init = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(init.status(), 200, "initialize");
        let id = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let _ = init.bytes().await.unwrap();
        let session = RawMcpSession {
            client,
            url: url.to_string(),
            id,
        };
        let done = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(done.status(), 202, "notifications/initialized");
        session
    }

    /// A POST of `body` in this session, not yet sent.
    pub fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .json(body)
    }

    /// A POST of `body` in this session.
    pub async fn post(&self, body: &Value) -> reqwest::Response {
        self.request(body).send().await.unwrap()
    }

    /// A `tools/call` as request `id`, with `meta` as its `_meta` when given.
    pub async fn call(&self, id: u64, tool: &str, args: Value, meta: Option<Value>) -> Reply {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let reply = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
        let status = reply.status().as_u16();
        let kind = reply.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        (status, kind, reply.text().await.unwrap())
    }

    /// Ends the MCP session (`DELETE`); its HTTP status.
    pub async fn end(&self) -> reqwest::StatusCode {
        let ended = self
            .client
            .delete(&self.url)
            .header("mcp-session-id", &self.id);
        ended.send().await.unwrap().status()
    }
}

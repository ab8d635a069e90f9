//! `mcp-bridge`: an MCP server as a Wharf backend, reached over streamable HTTP or run over
//! stdio in a container of the bridge's own. It registers no tools of its own:
//! `list_tools` answers the server's `tools/list`, and a call of a listed tool is the
//! server's `tools/call`. Over HTTP each pooled instance keeps its own MCP session,
//! initialized lazily (and tried at warmup, where a server that is down is only logged);
//! over stdio every instance shares one server process, found through kv — or, with
//! `"sessions": "per_session"`, each Wharf session has a server of its own, started by
//! the session's `initialize` and removed by its `cleanup`, and every tool needs a session
//! (the shared server then only answers the listing).

pub mod client;
pub mod config;
pub mod jsonrpc;
pub mod lines;
pub mod listing;
pub mod progress;
pub mod redact;
pub mod results;
pub mod server_state;
pub mod session;
pub mod stdio;
pub mod stdio_config;
pub mod stdio_server;
pub mod stdio_session;
pub mod stdio_start;
pub mod template;
pub mod transport;

use client::McpClient;
use config::{BridgeConfig, BridgeSettings};
use session::McpSession;
use stdio::StdioClient;
use wharf_sdk::host::{log, secrets};
use wharf_sdk::{
    Backend, BackendInfo, Call, Capabilities, Discovery, Session, ToolError, ToolSpec, Tools,
    Value, json,
};

/// The longest warmup waits for each request of its handshake with an HTTP server.
const WARMUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The backend: its MCP client, once warmed up.
pub struct Bridge {
    client: Option<Box<dyn McpClient>>,
}

impl Bridge {
    fn client(&mut self) -> Result<&mut dyn McpClient, ToolError> {
        match self.client.as_deref_mut() {
            Some(client) => {
                client.begin_call();
                Ok(client)
            }
            None => Err(
                ToolError::execution("the MCP bridge was not warmed up with its config")
                    .retryable(),
            ),
        }
    }
}

impl Backend for Bridge {
    fn new() -> Self {
        Bridge { client: None }
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "mcp-bridge",
            env!("CARGO_PKG_VERSION"),
            "An MCP server as a backend (streamable HTTP, or stdio in a container of its own): its tools are the server's tools.",
        )
        .config::<BridgeConfig>()
        .requires(Capabilities {
            // The server is the operator's choice, known only from the config: any host
            // and port, any image, which the operator's `grants.http_hosts` and
            // `grants.images` narrow to the server's.
            http_hosts: vec!["*:*".into()],
            images: vec!["*".into()],
            ..Capabilities::default()
        })
    }

    fn tools() -> Tools<Self> {
        Tools::new()
    }

    fn warmup(&mut self, config: Value) -> Result<(), ToolError> {
        let client: Box<dyn McpClient> = match BridgeSettings::from_config(config)? {
            BridgeSettings::Http(settings) => {
                // Every secret must be granted and readable now: a missing grant fails the load.
                settings.resolve_headers(&mut secrets::get)?;
                let mut session = McpSession::new(settings);
                if let Err(e) = session.initialize_within(WARMUP_TIMEOUT) {
                    let e = session.redactor().error(e);
                    log::warn(&format!(
                        "the MCP server did not initialize at warmup ({} {}); the next call tries again",
                        e.code, e.message
                    ));
                }
                Box::new(session)
            }
            // The server starts with the first listing (at load) or call.
            BridgeSettings::Stdio(settings) => Box::new(StdioClient::new(settings)?),
        };
        self.client = Some(client);
        Ok(())
    }

    fn shutdown(&mut self) {
        // Over stdio this leaves the shared server running: other instances use it.
        if let Some(client) = self.client.as_mut() {
            client.close();
        }
    }

    fn initialize(
        &mut self,
        session_id: &str,
        _key: &str,
        _config: Value,
    ) -> Result<Value, ToolError> {
        let client = self.client()?;
        client
            .open_session(session_id)
            .map_err(|e| client.redactor().error(e))
    }

    fn cleanup(&mut self, session: &Session) -> Result<(), ToolError> {
        let client = self.client()?;
        client
            .close_session(session)
            .map_err(|e| client.redactor().error(e))
    }

    fn discover(&mut self, session: &Session) -> Result<Discovery, ToolError> {
        let client = self.client()?;
        client
            .discover_session(session)
            .map_err(|e| client.redactor().error(e))
    }

    fn list_tools(&mut self) -> Result<Option<Vec<ToolSpec>>, ToolError> {
        let client = self.client()?;
        let need = client.session_need();
        let listing = listing::list_all(&mut |cursor| {
            let params = cursor.map(|c| json!({"cursor": c}));
            let result = client.request("tools/list", params)?.into_result()?;
            Ok(client.redactor().value(result))
        })
        .map_err(|e| client.redactor().error(e))?;
        if listing.truncated {
            log::warn(&format!(
                "the MCP server lists more than {} pages or {} tools; the first {} are served",
                listing::MAX_PAGES,
                listing::MAX_TOOLS,
                listing.tools.len()
            ));
        }
        let mut tools = listing.tools;
        for tool in &mut tools {
            tool.session = need;
        }
        Ok(Some(tools))
    }

    fn call_listed(
        &mut self,
        tool: &str,
        args: Value,
        call: &mut Call,
    ) -> Result<Value, ToolError> {
        let client = self.client()?;
        let params = json!({"name": tool, "arguments": args});
        let result = client
            .call_request("tools/call", Some(params), call)
            .and_then(|reply| reply.into_result())
            .map_err(|e| client.redactor().error(e))?;
        results::call_output(client.redactor().value(result), call)
    }
}

wharf_sdk::export_backend!(Bridge);

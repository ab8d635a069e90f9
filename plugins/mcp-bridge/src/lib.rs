//! `mcp-bridge`: a remote MCP server (streamable HTTP) as a Wharf backend. It registers no
//! tools of its own: `list_tools` answers the server's `tools/list`, and a call of a listed
//! tool is the server's `tools/call`. Each pooled instance keeps its own MCP session,
//! initialized lazily (and tried at warmup, where a server that is down is only logged).

pub mod config;
pub mod jsonrpc;
pub mod listing;
pub mod redact;
pub mod results;
pub mod session;
pub mod transport;

use config::{BridgeConfig, Settings};
use session::McpSession;
use wharf_sdk::host::{log, secrets};
use wharf_sdk::{
    Backend, BackendInfo, Call, Capabilities, ToolError, ToolSpec, Tools, Value, json,
};

/// The longest warmup waits for each request of its handshake with the server.
const WARMUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The backend: one MCP session, once warmed up.
pub struct Bridge {
    session: Option<McpSession>,
}

impl Bridge {
    fn session(&mut self) -> Result<&mut McpSession, ToolError> {
        self.session.as_mut().ok_or_else(|| {
            ToolError::execution("the MCP bridge was not warmed up with its config").retryable()
        })
    }
}

impl Backend for Bridge {
    fn new() -> Self {
        Bridge { session: None }
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "mcp-bridge",
            env!("CARGO_PKG_VERSION"),
            "A remote MCP server (streamable HTTP) as a backend: its tools are the server's tools.",
        )
        .config::<BridgeConfig>()
        .requires(Capabilities {
            // The server is the operator's choice, known only from the config: any host
            // and port, which the operator's `grants.http_hosts` narrows to the server.
            http_hosts: vec!["*:*".into()],
            ..Capabilities::default()
        })
    }

    fn tools() -> Tools<Self> {
        Tools::new()
    }

    fn warmup(&mut self, config: Value) -> Result<(), ToolError> {
        let settings = Settings::from_config(config)?;
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
        self.session = Some(session);
        Ok(())
    }

    fn shutdown(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.close();
        }
    }

    fn list_tools(&mut self) -> Result<Option<Vec<ToolSpec>>, ToolError> {
        let session = self.session()?;
        let listing = listing::list_all(&mut |cursor| {
            let params = cursor.map(|c| json!({"cursor": c}));
            let result = session.request("tools/list", params)?.into_result()?;
            Ok(session.redactor().value(result))
        })
        .map_err(|e| session.redactor().error(e))?;
        if listing.truncated {
            log::warn(&format!(
                "the MCP server lists more than {} pages or {} tools; the first {} are served",
                listing::MAX_PAGES,
                listing::MAX_TOOLS,
                listing.tools.len()
            ));
        }
        Ok(Some(listing.tools))
    }

    fn call_listed(
        &mut self,
        tool: &str,
        args: Value,
        call: &mut Call,
    ) -> Result<Value, ToolError> {
        let session = self.session()?;
        let params = json!({"name": tool, "arguments": args});
        let result = session
            .request("tools/call", Some(params))
            .and_then(|reply| reply.into_result())
            .map_err(|e| session.redactor().error(e))?;
        results::call_output(session.redactor().value(result), call)
    }
}

wharf_sdk::export_backend!(Bridge);

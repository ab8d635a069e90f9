//! The operator's config (`warmup`): how the bridge reaches the MCP server — over
//! streamable HTTP (`url`, `headers`) or over stdio in a container of its own (`image`,
//! `command`, `env`, … in [`crate::stdio_config`]) — and the timeout. `${secret:NAME}` in
//! a header or env value is the secret granted under NAME.
//!
//! Secret values are read when they are used, never kept in the config, and never put in
//! an error: errors name the header (or variable) and the secret only.

use crate::stdio_config::{NetworkConfig, STDIO_ONLY, SessionsMode, StdioSettings};
pub use crate::template::{Piece, fill, parse_template, secret_names};
use std::collections::BTreeMap;
use std::time::Duration;
use wharf_sdk::{Deserialize, JsonSchema, ToolError};

/// The timeout of one HTTP request (or of a stdio call) when the config sets none, ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest timeout accepted, ms (larger values are clamped).
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// Headers the bridge sets itself; the config may not set them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "transfer-encoding",
    "connection",
];

/// How the bridge reaches the MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// MCP streamable HTTP (protocol revision 2025-06-18): one POST per message.
    Http,
    /// MCP over stdio: the server runs in a container the bridge creates, its stdin and
    /// stdout carry newline-delimited JSON-RPC.
    Stdio,
}

/// The operator's config of the bridge. Fields of one transport are refused for the other.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// How to reach the server: `http` (streamable HTTP) or `stdio` (a server the bridge
    /// runs in a container of its own).
    pub transport: Transport,
    /// http: the MCP endpoint, e.g. `http://127.0.0.1:8931/mcp`.
    #[serde(default)]
    pub url: Option<String>,
    /// http: extra headers sent with every request; `${secret:NAME}` in a value is replaced
    /// by the secret the operator granted under NAME.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    /// Timeout in ms (default 30000, clamped to 1..=300000): of one HTTP request, or of a
    /// whole stdio call (the bridge keeps up to 1 s of it to cancel and answer).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// stdio: the image of the server's container (among the operator's `grants.images`).
    #[serde(default)]
    pub image: Option<String>,
    /// stdio: the server's argv (1-64 arguments, no shell), e.g.
    /// `["/usr/bin/python3", "/srv/server.py", "--stdio"]`.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// stdio: the server's environment; `${secret:NAME}` as in `headers`.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: the container's network: `"none"` (default), `"bridge"` or
    /// `{"named": "NAME"}` (granted by the operator's `grants.networks`).
    #[serde(default)]
    pub network: Option<NetworkConfig>,
    /// stdio: an argv the container runs as its own command, for an image whose default
    /// command would exit; none (default) keeps the image's.
    #[serde(default)]
    pub keep_alive_command: Option<Vec<String>>,
    /// stdio: the container's memory limit in MiB (default 512).
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// stdio: the container's CPU limit in thousandths of a core (default 1000).
    #[serde(default)]
    pub cpu_millis: Option<u32>,
    /// stdio: the container's process limit (default 128).
    #[serde(default)]
    pub pids_limit: Option<u32>,
    /// stdio: `"shared"` (default), one server for the whole backend, or `"per_session"`,
    /// one server (and container) per Wharf session, started when the session is created;
    /// its tools then need a session.
    #[serde(default)]
    pub sessions: Option<SessionsMode>,
    /// stdio: the container's isolation, `"container"` or `"gvisor"` (among the operator's
    /// `grants.isolation`); none (default) is the first level granted.
    #[serde(default)]
    pub isolation: Option<String>,
    /// stdio: who the server runs as (a name or uid, optionally `:group`); none (default)
    /// is the image's user.
    #[serde(default)]
    pub user: Option<String>,
    /// stdio: hosts (`host`, `host:port`, `*.suffix`) the server may reach through the
    /// host's egress proxy (`HTTP_PROXY`/`HTTPS_PROXY`), inside the operator's
    /// `grants.egress_to`; the container then has no network of its own (`network` must
    /// be `"none"`).
    #[serde(default)]
    pub allow_egress_to: Option<Vec<String>>,
    /// stdio: address ranges (CIDR) the server may reach through the same proxy, inside
    /// `grants.egress_cidrs`.
    #[serde(default)]
    pub allow_egress_to_cidrs: Option<Vec<String>>,
}

/// A configured header, its value parsed into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTemplate {
    /// The header name, lower case.
    pub name: String,
    /// The value's pieces.
    pub pieces: Vec<Piece>,
}

/// The HTTP config, checked: everything the streamable HTTP client needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The MCP endpoint.
    pub url: String,
    /// The extra headers.
    pub headers: Vec<HeaderTemplate>,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
}

/// The checked config of either transport.
#[derive(Debug, Clone)]
pub enum BridgeSettings {
    /// Streamable HTTP.
    Http(Settings),
    /// Stdio in a container.
    Stdio(StdioSettings),
}

impl BridgeSettings {
    /// Reads and checks the operator's JSON; every refusal is 4000.
    pub fn from_config(config: wharf_sdk::Value) -> Result<Self, ToolError> {
        if config.is_null() {
            return Err(ToolError::invalid_input(
                "the MCP bridge needs a config: {\"transport\": \"http\", \"url\": \"http://HOST:PORT/mcp\"} \
                 or {\"transport\": \"stdio\", \"image\": \"IMAGE\", \"command\": [\"PROGRAM\", \"ARG\"]}",
            ));
        }
        let config: BridgeConfig = wharf_sdk::serde_json::from_value(config)
            .map_err(|e| ToolError::invalid_input(format!("invalid MCP bridge config: {e}")))?;
        let ms = config
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS);
        let timeout = Duration::from_millis(ms);
        match config.transport {
            Transport::Http => Settings::from_checked(&config, timeout).map(Self::Http),
            Transport::Stdio => {
                only_for(
                    "stdio",
                    &[
                        ("url", config.url.is_some()),
                        ("headers", config.headers.is_some()),
                    ],
                )?;
                StdioSettings::from_checked(&config, timeout).map(Self::Stdio)
            }
        }
    }
}

/// Refuses a field that is set but belongs to the other transport.
fn only_for(transport: &str, set: &[(&str, bool)]) -> Result<(), ToolError> {
    match set.iter().find(|(_, present)| *present) {
        Some((field, _)) => Err(ToolError::invalid_input(format!(
            "`{field}` does not apply to `\"transport\": \"{transport}\"`; remove it"
        ))),
        None => Ok(()),
    }
}

impl Settings {
    fn from_checked(config: &BridgeConfig, timeout: Duration) -> Result<Self, ToolError> {
        only_for("http", &STDIO_ONLY.map(|(f, set)| (f, set(config))))?;
        let Some(url) = config.url.as_deref().map(str::trim) else {
            return Err(ToolError::invalid_input(
                "`\"transport\": \"http\"` needs `url`, e.g. \"http://127.0.0.1:8931/mcp\"",
            ));
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
            return Err(ToolError::invalid_input(
                "`url` must be an http:// or https:// URL (at most 2048 characters)",
            ));
        }
        let headers = config
            .headers
            .iter()
            .flatten()
            .map(|(name, value)| parse_header(name, value))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            url: url.to_string(),
            headers,
            timeout,
        })
    }

    /// The headers with their secrets read through `secret`, each value checked.
    pub fn resolve_headers(
        &self,
        secret: &mut dyn FnMut(&str) -> Result<String, ToolError>,
    ) -> Result<Vec<(String, String)>, ToolError> {
        self.headers.iter().map(|h| resolve(h, secret)).collect()
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Parses one configured header: a valid name the bridge does not set itself, and a value
/// whose `${secret:NAME}` references are well formed.
pub fn parse_header(name: &str, value: &str) -> Result<HeaderTemplate, ToolError> {
    if name.is_empty() || name.len() > 256 || !name.chars().all(is_token_char) {
        return Err(ToolError::invalid_input(format!(
            "`headers`: `{}` is not a valid header name",
            name.escape_debug()
        )));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED_HEADERS.contains(&lower.as_str()) {
        return Err(ToolError::invalid_input(format!(
            "`headers`: the bridge sets `{name}` itself"
        )));
    }
    let pieces = parse_template(&format!("header `{name}`"), value)?;
    for piece in &pieces {
        if let Piece::Text(text) = piece
            && !valid_value(text)
        {
            return Err(ToolError::invalid_input(format!(
                "header `{name}`: the value has a control character"
            )));
        }
    }
    Ok(HeaderTemplate {
        name: lower,
        pieces,
    })
}

fn valid_value(text: &str) -> bool {
    text.chars().all(|c| c == '\t' || !c.is_control())
}

/// The header's value, secrets read through `secret`. An error names the header and the
/// secret, never a value.
pub fn resolve(
    header: &HeaderTemplate,
    secret: &mut dyn FnMut(&str) -> Result<String, ToolError>,
) -> Result<(String, String), ToolError> {
    let value = fill(
        &format!("header `{}`", header.name),
        &header.pieces,
        secret,
        valid_value,
        "holds a control character (a newline?), which a header cannot carry",
    )?;
    Ok((header.name.clone(), value))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

//! The operator's config (`warmup`): where the MCP server is, which headers go with every
//! request (`${secret:NAME}` in a value is the secret granted under NAME), the timeout.
//!
//! Secret values are read when a request is sent, never kept in the config, and never put
//! in an error: errors name the header and the secret only.

use std::time::Duration;
use wharf_sdk::{Deserialize, JsonSchema, ToolError};

/// The timeout of one HTTP request when the config sets none, ms.
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
const SECRET_OPEN: &str = "${secret:";

/// How the bridge reaches the MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// MCP streamable HTTP (protocol revision 2025-06-18): one POST per message.
    Http,
}

/// The operator's config of the bridge.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// How to reach the server: only `http` (streamable HTTP) for now.
    pub transport: Transport,
    /// The MCP endpoint, e.g. `http://127.0.0.1:8931/mcp`.
    pub url: String,
    /// Extra headers sent with every request; `${secret:NAME}` in a value is replaced by
    /// the secret the operator granted under NAME.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Timeout of one HTTP request in ms (default 30000, clamped to 1..=300000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// One piece of a header value: literal text or a secret's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Sent as written.
    Text(String),
    /// Replaced by the secret granted under this name.
    Secret(String),
}

/// A configured header, its value parsed into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTemplate {
    /// The header name, lower case.
    pub name: String,
    /// The value's pieces.
    pub pieces: Vec<Piece>,
}

/// The config, checked: everything the MCP client needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The MCP endpoint.
    pub url: String,
    /// The extra headers.
    pub headers: Vec<HeaderTemplate>,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
}

impl Settings {
    /// Reads and checks the operator's JSON; every refusal is 4000.
    pub fn from_config(config: wharf_sdk::Value) -> Result<Self, ToolError> {
        if config.is_null() {
            return Err(ToolError::invalid_input(
                "the MCP bridge needs a config: {\"transport\": \"http\", \"url\": \"http://HOST:PORT/mcp\"}",
            ));
        }
        let config: BridgeConfig = wharf_sdk::serde_json::from_value(config)
            .map_err(|e| ToolError::invalid_input(format!("invalid MCP bridge config: {e}")))?;
        let url = config.url.trim().to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
            return Err(ToolError::invalid_input(
                "`url` must be an http:// or https:// URL (at most 2048 characters)",
            ));
        }
        let headers = config
            .headers
            .iter()
            .map(|(name, value)| parse_header(name, value))
            .collect::<Result<Vec<_>, _>>()?;
        let ms = config
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS);
        Ok(Self {
            url,
            headers,
            timeout: Duration::from_millis(ms),
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

fn is_secret_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
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
    let mut pieces = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find(SECRET_OPEN) {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_string()));
        }
        let after = &rest[start + SECRET_OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(ToolError::invalid_input(format!(
                "header `{name}`: `${{secret:` without its closing `}}`"
            )));
        };
        let secret = &after[..end];
        if !is_secret_name(secret) {
            return Err(ToolError::invalid_input(format!(
                "header `{name}`: `{}` is not a secret name (1-64 of A-Z a-z 0-9 _ . -)",
                secret.escape_debug()
            )));
        }
        pieces.push(Piece::Secret(secret.to_string()));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
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
    let mut value = String::new();
    for piece in &header.pieces {
        match piece {
            Piece::Text(text) => value.push_str(text),
            Piece::Secret(name) => {
                let got = secret(name).map_err(|e| {
                    ToolError::new(
                        e.code,
                        format!("header `{}`: secret `{name}`: {}", header.name, e.message),
                    )
                })?;
                if !valid_value(&got) {
                    return Err(ToolError::invalid_input(format!(
                        "header `{}`: secret `{name}` holds a control character (a newline?), \
                         which a header cannot carry",
                        header.name
                    )));
                }
                value.push_str(&got);
            }
        }
    }
    Ok((header.name.clone(), value))
}

/// The secret names the headers use.
pub fn secret_names(headers: &[HeaderTemplate]) -> Vec<&str> {
    headers
        .iter()
        .flat_map(|h| h.pieces.iter())
        .filter_map(|p| match p {
            Piece::Secret(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
        .collect()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

//! A small REST client for the provisioner over `wasi:http/outgoing-handler` (via `waki`),
//! and the mapping of transport failures and HTTP statuses to Wharf error codes.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::time::Duration;
use waki::{Client, Method};
use wharf_sdk::{ToolError, Value};

/// How long to wait for a connection to the provisioner.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an error reply's body goes into the error message.
const ERROR_BODY_CHARS: usize = 300;

/// The operator's config, as passed to `warmup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    base_url: String,
    #[serde(default)]
    token: Option<String>,
}

/// Where the provisioner is and how to authenticate to it.
pub struct Remote {
    base: String,
    token: Option<String>,
}

/// An HTTP reply: status and raw body.
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// The body, read whole.
    pub body: Vec<u8>,
}

impl Reply {
    /// Parses the body as JSON; a malformed body is the provisioner's fault (5000).
    pub fn json<T: DeserializeOwned>(&self, what: &str) -> Result<T, ToolError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ToolError::execution(format!(
                "{what}: the provisioner sent an unreadable reply: {e}"
            ))
        })
    }

    /// The error for a status the caller did not expect: 5xx is retryable 5000, 4xx is 4000.
    pub fn error(&self, what: &str) -> ToolError {
        let text = String::from_utf8_lossy(&self.body);
        let excerpt: String = text.chars().take(ERROR_BODY_CHARS).collect();
        let message = format!(
            "{what}: the provisioner answered HTTP {}: {excerpt}",
            self.status
        );
        match self.status {
            500..=599 => ToolError::execution(message).retryable(),
            400..=499 => ToolError::invalid_input(message),
            _ => ToolError::execution(message),
        }
    }
}

impl Remote {
    /// Reads `{"base_url": "http://host:port", "token": "..."}`.
    pub fn from_config(config: Value) -> Result<Self, ToolError> {
        if config.is_null() {
            return Err(ToolError::invalid_input(
                "the remote provider needs a config: {\"base_url\": \"http://host:port\", \"token\": optional}",
            ));
        }
        let config: Config = serde_json::from_value(config).map_err(|e| {
            ToolError::invalid_input(format!("invalid remote provider config: {e}"))
        })?;
        let base = config.base_url.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ToolError::invalid_input(format!(
                "base_url must be an http:// or https:// URL, got `{base}`"
            )));
        }
        let token = config.token.filter(|t| !t.is_empty());
        Ok(Self { base, token })
    }

    /// `{base}/api/sandboxes`.
    pub fn sandboxes_url(&self) -> String {
        format!("{}/api/sandboxes", self.base)
    }

    /// `{base}/api/sandboxes/{id}`, the sandbox's own API root.
    pub fn sandbox_url(&self, id: &str) -> String {
        format!("{}/api/sandboxes/{id}", self.base)
    }

    /// Sends one request with an optional JSON body. A transport failure is a retryable 5000.
    pub fn send(
        &self,
        method: Method,
        url: &str,
        json: Option<Vec<u8>>,
    ) -> Result<Reply, ToolError> {
        let mut request = Client::new()
            .request(method, url)
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(body) = json {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let unreachable = |e: String| {
            ToolError::execution(format!(
                "the sandbox provisioner at {} is unreachable: {e}",
                self.base
            ))
            .retryable()
        };
        let response = request.send().map_err(|e| unreachable(e.to_string()))?;
        let status = response.status_code();
        let body = response.body().map_err(|e| unreachable(e.to_string()))?;
        Ok(Reply { status, body })
    }
}

/// Checks that a sandbox id is safe to put in a URL path segment.
pub fn check_id(id: &str) -> Result<(), ToolError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && id != "."
        && id != "..";
    if ok {
        Ok(())
    } else {
        Err(ToolError::invalid_input(format!(
            "`{id}` is not a sandbox id of this provider"
        )))
    }
}

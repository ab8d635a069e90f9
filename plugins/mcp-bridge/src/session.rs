//! The MCP client over streamable HTTP (revision 2025-06-18): initialize lazily, keep the
//! server's `Mcp-Session-Id` and the negotiated version, send each request as one POST and
//! find its reply in a JSON or SSE body; an expired session (404) is initialized again once.

use crate::client::CALLER_CANCELLED;
use crate::config::Settings;
use crate::jsonrpc::{self, MAX_BODY_BYTES, Reply, SseScanner};
use crate::redact::Redactor;
use crate::transport::{self, Method, OnCancel, Response};
use std::time::Duration;
use wharf_sdk::host::secrets;
use wharf_sdk::{ToolError, Value, codes, json};

/// The protocol revision the bridge asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// How the bridge introduces itself.
const CLIENT_NAME: &str = "wharf-mcp-bridge";
/// How long the goodbye (`DELETE`) may take at shutdown.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long telling the server of an abandoned request may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(1);

/// Header names and values.
type Headers = Vec<(String, String)>;

/// What an initialized session carries in every request.
#[derive(Debug, Clone)]
struct Established {
    session_id: Option<String>,
    version: String,
}

/// One MCP session with one server, kept by a backend instance.
pub struct McpSession {
    settings: Settings,
    established: Option<Established>,
    next_id: u64,
    redactor: Redactor,
}

fn visible_ascii(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && text.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

impl McpSession {
    /// A session not yet initialized.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            established: None,
            next_id: 1,
            redactor: Redactor::default(),
        }
    }

    /// What keeps the secrets sent out of errors and outputs.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The configured headers with their secrets read now (and remembered for redaction).
    fn headers(&mut self) -> Result<Headers, ToolError> {
        let redactor = &mut self.redactor;
        self.settings.resolve_headers(&mut |name| {
            let value = secrets::get(name)?;
            redactor.remember(name, &value);
            Ok(value)
        })
    }

    /// Initializes now when not initialized yet.
    pub fn ensure(&mut self) -> Result<(), ToolError> {
        if self.established.is_none() {
            self.initialize()?;
        }
        Ok(())
    }

    /// Runs the handshake with each request's timeout capped at `cap` (warmup's try, which
    /// must not hold a load for long when the server is away).
    pub fn initialize_within(&mut self, cap: Duration) -> Result<(), ToolError> {
        let timeout = self.settings.timeout;
        self.settings.timeout = timeout.min(cap);
        let result = self.initialize();
        self.settings.timeout = timeout;
        result
    }

    /// Runs the handshake: `initialize`, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<(), ToolError> {
        self.established = None;
        let id = self.take_id();
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
        });
        let message = jsonrpc::request(id, "initialize", Some(params));
        let mut response = self.post(&message, None)?;
        let session_id = response.header("mcp-session-id").map(str::to_string);
        // Whatever the server's error code, it is not the caller's arguments: 5000.
        let result = self
            .reply(&mut response, id, "initialize")?
            .into_result()
            .map_err(|e| {
                ToolError::execution(format!(
                    "the MCP server refused to initialize: {}",
                    e.message
                ))
            })?;
        if let Some(sid) = &session_id
            && !visible_ascii(sid, 1024)
        {
            return Err(ToolError::execution(
                "the MCP server sent an Mcp-Session-Id that is not visible ASCII",
            ));
        }
        let version = match result.get("protocolVersion").and_then(Value::as_str) {
            Some(v) if visible_ascii(v, 64) => v.to_string(),
            _ => {
                return Err(ToolError::execution(
                    "the MCP server's initialize result has no valid `protocolVersion`",
                ));
            }
        };
        let established = Established {
            session_id,
            version,
        };
        let note = jsonrpc::notification("notifications/initialized");
        let response = self.post(&note, Some(&established))?;
        if response.status >= 400 {
            return Err(status_error(response.status, "notifications/initialized"));
        }
        self.established = Some(established);
        Ok(())
    }

    /// Sends request `method` and returns its reply, initializing first when needed.
    pub fn request(&mut self, method: &str, params: Option<Value>) -> Result<Reply, ToolError> {
        self.ensure()?;
        match self.request_once(method, params.clone())? {
            Some(reply) => Ok(reply),
            None => {
                // 404 to a request with a session id: the session expired.
                self.initialize()?;
                self.request_once(method, params)?
                    .ok_or_else(|| status_error(404, method))
            }
        }
    }

    /// One try; `None` when a request with a session id was answered 404.
    fn request_once(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Option<Reply>, ToolError> {
        let id = self.take_id();
        let message = jsonrpc::request(id, method, params);
        let established = self.established.clone();
        let answer = self
            .post(&message, established.as_ref())
            .and_then(|mut response| {
                let had_session = established.as_ref().is_some_and(|e| e.session_id.is_some());
                if response.status == 404 && had_session {
                    self.established = None;
                    return Ok(None);
                }
                self.reply(&mut response, id, method).map(Some)
            });
        if let Err(e) = &answer
            && (e.code == codes::TIMEOUT || e.code == CALLER_CANCELLED)
        {
            let reason = if e.code == CALLER_CANCELLED {
                "the Wharf caller cancelled the call"
            } else {
                "the Wharf bridge's deadline passed"
            };
            self.cancel(id, established.as_ref(), reason);
        }
        answer
    }

    /// Tells the server request `id` is abandoned (`notifications/cancelled`), best effort
    /// and briefly: the bridge stopped waiting for it (its deadline, or the caller's cancel).
    fn cancel(&mut self, id: u64, established: Option<&Established>, reason: &str) {
        let note = jsonrpc::cancelled(id, reason);
        let Ok(headers) = self.message_headers(established) else {
            return;
        };
        if let Ok(body) = wharf_sdk::serde_json::to_vec(&note) {
            let _ = transport::send(
                Method::Post,
                &self.settings.url,
                &headers,
                &body,
                CANCEL_TIMEOUT,
                OnCancel::Finish,
            );
        }
    }

    /// Ends the session on the server (`DELETE`), best effort.
    pub fn close(&mut self) {
        let Some(Established {
            session_id: Some(sid),
            version,
        }) = self.established.take()
        else {
            return;
        };
        if let Ok(mut headers) = self.headers() {
            headers.push(("mcp-session-id".into(), sid));
            headers.push(("mcp-protocol-version".into(), version));
            let _ = transport::send(
                Method::Delete,
                &self.settings.url,
                &headers,
                &[],
                GOODBYE_TIMEOUT,
                OnCancel::Finish,
            );
        }
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The headers of a message POSTed in the session `established` (if any).
    fn message_headers(&mut self, established: Option<&Established>) -> Result<Headers, ToolError> {
        let mut headers = self.headers()?;
        headers.push(("content-type".into(), "application/json".into()));
        headers.push((
            "accept".into(),
            "application/json, text/event-stream".into(),
        ));
        if let Some(e) = established {
            if let Some(sid) = &e.session_id {
                headers.push(("mcp-session-id".into(), sid.clone()));
            }
            headers.push(("mcp-protocol-version".into(), e.version.clone()));
        }
        Ok(headers)
    }

    /// POSTs one message; returns the response, its headers in.
    fn post(
        &mut self,
        message: &Value,
        established: Option<&Established>,
    ) -> Result<Response, ToolError> {
        let headers = self.message_headers(established)?;
        let body = wharf_sdk::serde_json::to_vec(message)?;
        let response = transport::send(
            Method::Post,
            &self.settings.url,
            &headers,
            &body,
            self.settings.timeout,
            OnCancel::End,
        )?;
        Ok(response)
    }

    /// The reply to request `id` in `response`, by its content type.
    fn reply(&self, response: &mut Response, id: u64, method: &str) -> Result<Reply, ToolError> {
        if response.status >= 400 {
            return Err(status_error(response.status, method));
        }
        let content_type = response
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") {
            let mut scanner = SseScanner::new(id);
            while let Some(chunk) = response.chunk()? {
                let reply = scanner.feed(&chunk)?;
                crate::progress::relay(scanner.progress.take());
                if let Some(reply) = reply {
                    return Ok(reply);
                }
            }
            scanner.finish()
        } else if content_type.starts_with("application/json") {
            let body = response.read_to_end(MAX_BODY_BYTES)?;
            jsonrpc::reply_in_json(&body, id)
        } else {
            Err(ToolError::execution(format!(
                "the MCP server answered HTTP {} with content type `{}`, neither JSON nor an event stream",
                response.status,
                jsonrpc::truncate(&content_type, 64).escape_debug()
            )))
        }
    }
}

/// An HTTP status of 400 or more as a 5000 (502, 503, 504 and 429 retryable).
pub fn status_error(status: u16, what: &str) -> ToolError {
    let hint = if matches!(status, 401 | 403) {
        " (check the `headers` of the bridge's config and the secrets they name)"
    } else {
        ""
    };
    let error = ToolError::execution(format!(
        "the MCP server answered `{what}` with HTTP {status}{hint}"
    ));
    if matches!(status, 429 | 502 | 503 | 504) {
        error.retryable()
    } else {
        error
    }
}

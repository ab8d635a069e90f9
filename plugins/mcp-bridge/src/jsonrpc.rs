//! JSON-RPC 2.0 as MCP's streamable HTTP carries it: the messages the bridge sends, and the
//! response it looks for in a body that is either one JSON message or an SSE stream
//! (`text/event-stream`) of messages, read incrementally and within bounds.

use crate::progress::{PendingNotes, note_for};
use wharf_sdk::serde_json::{self, Map, Value, json};
use wharf_sdk::{ToolError, codes};

/// The most bytes read of one response body.
pub const MAX_BODY_BYTES: usize = 16 << 20;
/// The most SSE events read of one response body.
pub const MAX_SSE_EVENTS: usize = 4096;
/// How much of the server's error message goes into ours.
pub const SERVER_MESSAGE_CHARS: usize = 512;

/// A request message with `id` (a number over HTTP, a string over stdio). A `tools/call`
/// asks for the server's progress, with the id as its token (see [`crate::progress`]).
pub fn request(id: impl Into<Value>, method: &str, params: Option<Value>) -> Value {
    let id = id.into();
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(mut params) = params {
        if method == "tools/call"
            && let Some(object) = params.as_object_mut()
        {
            let meta = object
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("progressToken".into(), id);
            }
        }
        message["params"] = params;
    }
    message
}

/// A notification message (no `id`).
pub fn notification(method: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": method})
}

/// `notifications/cancelled` for request `id` (either transport's id), saying why.
pub fn cancelled(id: impl Into<Value>, reason: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id.into(), "reason": reason}})
}

/// The answer to a request: its `result`, or its `error`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `result`.
    Result(Value),
    /// `error`: code and message.
    Error {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
    },
}

impl Reply {
    /// The result, or the server's error as a Wharf error: `-32602` (invalid params) is
    /// 4004, `-32601` (no such method) 4000, anything else 5000.
    pub fn into_result(self) -> Result<Value, ToolError> {
        match self {
            Reply::Result(value) => Ok(value),
            Reply::Error { code, message } => {
                let message = truncate(&message, SERVER_MESSAGE_CHARS);
                Err(match code {
                    -32602 => ToolError::new(codes::INVALID_TYPE, message),
                    -32601 => ToolError::invalid_input(message),
                    _ => ToolError::execution(format!("the MCP server refused: {message}")),
                })
            }
        }
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn bad(what: impl std::fmt::Display) -> ToolError {
    ToolError::execution(format!("the MCP server sent {what}"))
}

/// Whether `message` answers request `id`: `Some(reply)` when it does, `None` for any other
/// message (a notification, a request of the server's, another id).
pub fn match_reply(message: &Value, id: u64) -> Result<Option<Reply>, ToolError> {
    match_reply_to(message, &Value::from(id))
}

/// [`match_reply`] for an id of any JSON type (equal as JSON values).
pub fn match_reply_to(message: &Value, id: &Value) -> Result<Option<Reply>, ToolError> {
    let Some(object) = message.as_object() else {
        return Err(bad("a JSON-RPC message that is not an object"));
    };
    if object.contains_key("method") || object.get("id") != Some(id) {
        return Ok(None);
    }
    reply_of(object).map(Some)
}

fn reply_of(object: &Map<String, Value>) -> Result<Reply, ToolError> {
    if let Some(result) = object.get("result") {
        return Ok(Reply::Result(result.clone()));
    }
    match object.get("error") {
        Some(Value::Object(error)) => Ok(Reply::Error {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string(),
        }),
        Some(_) => Err(bad("a JSON-RPC error that is not an object")),
        None => Err(bad("a JSON-RPC response with neither `result` nor `error`")),
    }
}

fn parse_json(text: &[u8]) -> Result<Value, ToolError> {
    let text = std::str::from_utf8(text).map_err(|_| bad("a body that is not UTF-8"))?;
    serde_json::from_str(text).map_err(|e| bad(format_args!("malformed JSON ({e})")))
}

/// The reply to request `id` in an `application/json` body.
pub fn reply_in_json(body: &[u8], id: u64) -> Result<Reply, ToolError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(bad(format_args!("more than {MAX_BODY_BYTES} bytes")));
    }
    let message = parse_json(body)?;
    match_reply(&message, id)?.ok_or_else(|| bad(format_args!("no response to request {id}")))
}

/// Reads an SSE body chunk by chunk until the reply to request `id`: events are separated
/// by a blank line, their `data:` lines joined with `\n`; comments, other fields, events
/// without data and messages that are not the reply are skipped.
#[derive(Debug)]
pub struct SseScanner {
    id: u64,
    line: Vec<u8>,
    data: String,
    has_data: bool,
    events: usize,
    bytes: usize,
    /// The server's progress notes on the request, until the transport takes them.
    pub progress: PendingNotes,
}

impl SseScanner {
    /// A scanner looking for the reply to request `id`.
    pub fn new(id: u64) -> Self {
        Self {
            id,
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            events: 0,
            bytes: 0,
            progress: PendingNotes::default(),
        }
    }

    /// Feeds the next chunk; `Some(reply)` once the reply is seen (stop reading then).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Option<Reply>, ToolError> {
        self.bytes += chunk.len();
        if self.bytes > MAX_BODY_BYTES {
            return Err(bad(format_args!(
                "an event stream of more than {MAX_BODY_BYTES} bytes without the response"
            )));
        }
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..at]);
            rest = &rest[at + 1..];
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(reply) = self.line_done(&line)? {
                return Ok(Some(reply));
            }
        }
        self.line.extend_from_slice(rest);
        Ok(None)
    }

    /// The end of the body: a last event without its blank line still counts; no reply
    /// by then is an error.
    pub fn finish(mut self) -> Result<Reply, ToolError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if let Some(reply) = self.line_done(&line)? {
                return Ok(reply);
            }
        }
        if let Some(reply) = self.dispatch()? {
            return Ok(reply);
        }
        Err(bad(format_args!(
            "an event stream that ended without the response to request {}",
            self.id
        )))
    }

    fn line_done(&mut self, line: &[u8]) -> Result<Option<Reply>, ToolError> {
        if line.is_empty() {
            return self.dispatch();
        }
        let line =
            std::str::from_utf8(line).map_err(|_| bad("an event stream that is not UTF-8"))?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            self.has_data = true;
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Result<Option<Reply>, ToolError> {
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) || data.trim().is_empty() {
            return Ok(None);
        }
        self.events += 1;
        if self.events > MAX_SSE_EVENTS {
            return Err(bad(format_args!(
                "more than {MAX_SSE_EVENTS} events without the response"
            )));
        }
        let message = parse_json(data.as_bytes())?;
        let reply = match_reply(&message, self.id)?;
        if reply.is_none()
            && let Some(note) = note_for(&message, &Value::from(self.id))
        {
            self.progress.push(note);
        }
        Ok(reply)
    }
}

#[cfg(test)]
#[path = "jsonrpc_tests.rs"]
mod tests;

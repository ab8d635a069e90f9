//! MCP over stdio to the shared server process (or, with `"sessions": "per_session"`, for
//! a tool call, to the call's session's own, see [`crate::stdio_session`]): each request
//! is one line on its stdin, and its reply is looked for in the process's output (stdout
//! and stderr in one ring, shared with every other instance) from where the output stood
//! before the request was written, until the bridge's deadline.

use crate::client::CALLER_CANCELLED;
use crate::client::McpClient;
use crate::jsonrpc::{self, Reply};
use crate::lines::LineScanner;
use crate::redact::Redactor;
use crate::stdio_config::{SessionsMode, StdioSettings};
use crate::stdio_server::{Proc, ServerFinder, is_gone, probe};
use crate::stdio_session;
use std::time::{Duration, Instant};
use wharf_sdk::host::{process, secrets};
use wharf_sdk::{Call, Discovery, Session, SessionNeed, ToolError, Value, json};

/// The longest message written to the server (the agent takes one write of this much).
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// The most bytes asked of the output at once.
const READ_BYTES: u32 = 256 * 1024;
/// The longest one wait for output.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Why an exchange with the server failed.
#[derive(Debug)]
pub enum Failure {
    /// The process is gone: exited (with its code when known) and its output read. The
    /// text is the end of its output (quoted only for a new server's handshake: later, the
    /// output holds other callers' replies).
    Exited(Option<i32>, String),
    /// The request could not be written: the server never saw it.
    NotSent(ToolError),
    /// Anything else.
    Error(ToolError),
}

impl From<ToolError> for Failure {
    fn from(e: ToolError) -> Self {
        Failure::Error(e)
    }
}

/// Request ids unique across instances: a random prefix per instance and a counter.
#[derive(Debug)]
pub struct IdMaker {
    prefix: String,
    next: u64,
}

/// 64 random-ish bits: the host's random seed of std's hasher, mixed with the time and a
/// counter.
fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::collections::hash_map::RandomState::new()
        .hash_one((nanos, COUNTER.fetch_add(1, Ordering::Relaxed)))
}

impl IdMaker {
    /// A fresh prefix.
    pub fn new() -> Self {
        Self {
            prefix: format!("wharf-{:016x}", random_u64()),
            next: 0,
        }
    }

    /// This instance's token (the ids' prefix).
    pub fn token(&self) -> &str {
        &self.prefix
    }

    /// The next id.
    pub fn next_id(&mut self) -> String {
        self.next += 1;
        format!("{}-{}", self.prefix, self.next)
    }
}

impl Default for IdMaker {
    fn default() -> Self {
        Self::new()
    }
}

/// `message` as one line, refused past [`MAX_MESSAGE_BYTES`] (4000).
pub fn line_of(message: &Value, what: &str) -> Result<Vec<u8>, ToolError> {
    let mut line = wharf_sdk::serde_json::to_vec(message)?;
    line.push(b'\n');
    if line.len() > MAX_MESSAGE_BYTES {
        return Err(ToolError::invalid_input(format!(
            "the `{what}` request is {} bytes, over the {} KiB a stdio MCP server is sent at once",
            line.len(),
            MAX_MESSAGE_BYTES >> 10
        )));
    }
    Ok(line)
}

/// Writes one line to the server's stdin.
pub fn write_line(server: &Proc, line: &[u8]) -> Result<(), ToolError> {
    Ok(process::write_stdin(
        &server.container,
        server.pid,
        line,
        false,
    )?)
}

/// Tells the server the request `id` is abandoned (best effort).
fn cancel(server: &Proc, id: &str, reason: &str) {
    if let Ok(line) = line_of(&jsonrpc::cancelled(id, reason), "notifications/cancelled") {
        let _ = write_line(server, &line);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Writes request `line` (id `id`) and reads the output from `offset` until its reply.
/// Returns the reply and the offset after the bytes read.
pub fn exchange(
    server: &Proc,
    offset: u64,
    line: &[u8],
    id: &str,
    method: &str,
    deadline: Instant,
) -> Result<(Reply, u64), Failure> {
    write_line(server, line).map_err(Failure::NotSent)?;
    read_reply(server, offset, id, method, deadline)
}

/// Reads the output from `offset` until the reply to request `id`, the process's end or
/// the deadline. Returns the reply and the offset after the bytes read.
pub fn read_reply(
    server: &Proc,
    offset: u64,
    id: &str,
    method: &str,
    deadline: Instant,
) -> Result<(Reply, u64), Failure> {
    let mut scanner = LineScanner::new(id);
    let mut offset = offset;
    loop {
        let now = Instant::now();
        if now >= deadline {
            cancel(server, id, "the Wharf bridge's deadline passed");
            if scanner.dropped > 0 {
                return Err(scanner.overrun().into());
            }
            return Err(ToolError::timeout(format!(
                "the MCP server did not answer `{method}` within the bridge's `timeout_ms`"
            ))
            .into());
        }
        let wait = (deadline - now).min(MAX_WAIT);
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        let out = match process::output(&server.container, server.pid, offset, READ_BYTES, wait_ms)
        {
            Ok(out) => out,
            Err(e) => {
                let e = ToolError::from(e);
                if is_gone(&e) {
                    return Err(Failure::Exited(None, scanner.tail()));
                }
                if e.code == CALLER_CANCELLED {
                    cancel(server, id, "the Wharf caller cancelled the call");
                }
                return Err(e.into());
            }
        };
        scanner.note_dropped(out.dropped);
        let reply = scanner.feed(&out.data)?;
        crate::progress::relay(scanner.progress.take());
        if let Some(reply) = reply {
            return Ok((reply, out.offset + out.data.len() as u64));
        }
        offset = out.offset + out.data.len() as u64;
        let info = &out.process;
        if !info.running && offset >= info.output_bytes {
            if let Some(reply) = scanner.finish()? {
                return Ok((reply, offset));
            }
            return Err(Failure::Exited(info.exit_code, scanner.tail()));
        }
        // Nothing, though the server runs and the wait was cut short: the host clamped
        // it to the call's own deadline, which is upon us.
        if out.data.is_empty()
            && out.dropped == 0
            && wait_ms >= 200
            && millis(now.elapsed()) + 100 < u64::from(wait_ms)
        {
            cancel(server, id, "the Wharf call's deadline passed");
            return Err(ToolError::timeout(format!(
                "the MCP server did not answer `{method}` before the call's deadline"
            ))
            .into());
        }
    }
}

/// The error of a server that exited: 5012, retryable (the next call starts it again).
pub fn exited(code: Option<i32>, tail: &str, during: &str) -> ToolError {
    let what = code.map_or_else(
        || "is gone (its process or its container ended)".to_string(),
        |c| format!("exited (code {c})"),
    );
    let last = tail.trim_end().rsplit('\n').next().unwrap_or("").trim();
    let last = if last.is_empty() {
        String::new()
    } else {
        format!(
            "; its last output: {}",
            jsonrpc::truncate(last, 300).escape_debug()
        )
    };
    ToolError::dependency(format!("the MCP server {what}{during}{last}"))
}

/// The stdio transport of one instance.
pub struct StdioClient {
    settings: StdioSettings,
    finder: ServerFinder,
    redactor: Redactor,
    ids: IdMaker,
    deadline: Instant,
}

/// The part of a call the bridge keeps to cancel and answer before the host's deadline.
fn reserve(timeout: Duration) -> Duration {
    (timeout / 10).min(Duration::from_secs(1))
}

impl StdioClient {
    /// A client for `settings`; reads the env's secrets now (a missing grant fails the
    /// load) and remembers them for redaction.
    pub fn new(settings: StdioSettings) -> Result<Self, ToolError> {
        let mut redactor = Redactor::default();
        settings.resolve_env(&mut |name| {
            let value = secrets::get(name)?;
            redactor.remember(name, &value);
            Ok(value)
        })?;
        let ids = IdMaker::new();
        let finder = ServerFinder::new(&settings, ids.token());
        Ok(Self {
            deadline: Instant::now() + settings.timeout,
            settings,
            finder,
            redactor,
            ids,
        })
    }
}

impl McpClient for StdioClient {
    fn begin_call(&mut self) {
        let timeout = self.settings.timeout;
        self.deadline = Instant::now() + (timeout - reserve(timeout));
    }

    fn request(&mut self, method: &str, params: Option<Value>) -> Result<Reply, ToolError> {
        let id = self.ids.next_id();
        let line = line_of(&jsonrpc::request(id.as_str(), method, params), method)?;
        // A server found gone before the request reached it is started again, once.
        for attempt in 0..2 {
            let (server, offset) = self.finder.ensure(
                &self.settings,
                &mut self.redactor,
                &mut self.ids,
                self.deadline,
            )?;
            match exchange(&server, offset, &line, &id, method, self.deadline) {
                Ok((reply, _)) => return Ok(reply),
                Err(Failure::NotSent(e)) => {
                    if attempt == 1 || self.finder.alive(&server)? {
                        return Err(e);
                    }
                    self.finder.forget(&server);
                }
                Err(Failure::Error(e)) => return Err(e),
                // Its last output is not quoted here: the ring holds other callers' replies.
                Err(Failure::Exited(code, _)) => {
                    self.finder.forget(&server);
                    return Err(exited(code, "", &format!(" during `{method}`")));
                }
            }
        }
        Err(ToolError::dependency(
            "the MCP server could not be reached; try again",
        ))
    }

    fn call_request(
        &mut self,
        method: &str,
        params: Option<Value>,
        call: &mut Call,
    ) -> Result<Reply, ToolError> {
        if self.settings.sessions == SessionsMode::Shared {
            return self.request(method, params);
        }
        let mut session = call.require_session()?.clone();
        let id = self.ids.next_id();
        let line = line_of(&jsonrpc::request(id.as_str(), method, params), method)?;
        // A server found gone before the request reached it is started again, once.
        for attempt in 0..2 {
            let found = stdio_session::ensure(
                &self.settings,
                &mut self.redactor,
                &mut self.ids,
                self.deadline,
                &session,
            )?;
            if let Some(data) = found.data {
                call.set_session_data(data.clone());
                session.data = data;
            }
            let server = found.server;
            match exchange(&server, found.end, &line, &id, method, self.deadline) {
                Ok((reply, _)) => return Ok(reply),
                Err(Failure::NotSent(e)) => {
                    if attempt == 1 || probe(&server)?.is_some() {
                        return Err(e);
                    }
                    stdio_session::forget(&server);
                }
                Err(Failure::Error(e)) => return Err(e),
                // The output is the session's own server's: its last words are quoted.
                Err(Failure::Exited(code, tail)) => {
                    stdio_session::forget(&server);
                    return Err(exited(code, &tail, &format!(" during `{method}`")));
                }
            }
        }
        Err(ToolError::dependency(
            "the session's MCP server could not be reached; try again",
        ))
    }

    fn session_need(&self) -> SessionNeed {
        match self.settings.sessions {
            SessionsMode::Shared => SessionNeed::None,
            SessionsMode::PerSession => SessionNeed::Required,
        }
    }

    fn open_session(&mut self, session_id: &str) -> Result<Value, ToolError> {
        match self.settings.sessions {
            SessionsMode::Shared => Ok(json!({})),
            SessionsMode::PerSession => stdio_session::open(
                &self.settings,
                &mut self.redactor,
                &mut self.ids,
                self.deadline,
                session_id,
            ),
        }
    }

    fn close_session(&mut self, session: &Session) -> Result<(), ToolError> {
        // A session of a per-session config the operator since changed is cleaned up too.
        if self.settings.sessions == SessionsMode::PerSession
            || stdio_session::from_data(&session.data).is_some()
        {
            return stdio_session::close(session);
        }
        Ok(())
    }

    fn discover_session(&mut self, session: &Session) -> Result<Discovery, ToolError> {
        match self.settings.sessions {
            SessionsMode::Shared => Ok(Discovery::Alive),
            SessionsMode::PerSession => stdio_session::discover(session),
        }
    }

    fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;

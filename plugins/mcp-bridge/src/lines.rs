//! Finding the reply to one request in a stdio server's output: newline-delimited
//! JSON-RPC, mixed with other instances' replies, notifications and the server's stderr
//! (the agent keeps stdout and stderr in one ring). Read chunk by chunk, within bounds: a
//! line longer than [`MAX_LINE_BYTES`] is skipped without being kept, and at most
//! [`MAX_SCAN_BYTES`] of output (read, or dropped by the ring unread) are waded through
//! for one request. Output the ring dropped is skipped over: a reply found whole after it
//! is still the reply; one not found is reported as lost to the drop.

use crate::jsonrpc::{Reply, match_reply_to};
use crate::progress::{PendingNotes, note_for};
use wharf_sdk::ToolError;
use wharf_sdk::serde_json::{self, Value};

/// The longest line kept (a longer one is skipped, or refused when it is the reply).
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// The most output bytes read while looking for one reply.
pub const MAX_SCAN_BYTES: u64 = 16 << 20;
/// How much of the output's end is kept for an error's message.
const TAIL_BYTES: usize = 1024;

/// Reads output until the reply to one request id.
#[derive(Debug)]
pub struct LineScanner {
    id: Value,
    needle: Vec<u8>,
    line: Vec<u8>,
    skipping: bool,
    scanned: u64,
    tail: Vec<u8>,
    /// Bytes the ring dropped before the bridge read them.
    pub dropped: u64,
    /// Lines skipped for their length.
    pub oversized: u64,
    /// Lines with the id that are not JSON.
    pub malformed: u64,
    /// The server's progress notes on the request, until the transport takes them.
    pub progress: PendingNotes,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

impl LineScanner {
    /// A scanner for the reply to request `id` (a string id: its JSON text is looked for
    /// before a line is parsed, so other lines cost no parsing).
    pub fn new(id: &str) -> Self {
        let id = Value::String(id.to_string());
        Self {
            needle: id.to_string().into_bytes(),
            id,
            line: Vec::new(),
            skipping: false,
            scanned: 0,
            tail: Vec::new(),
            dropped: 0,
            oversized: 0,
            malformed: 0,
            progress: PendingNotes::default(),
        }
    }

    /// The end of the output read so far, as text (for an error's message).
    pub fn tail(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }

    /// Notes that `bytes` of output were dropped before the next chunk: the line being
    /// read lost its end, and the next chunk may start inside a line.
    pub fn note_dropped(&mut self, bytes: u64) {
        if bytes > 0 {
            self.dropped += bytes;
            // Output waded through, read or not: the bound is on how much a reply may
            // wait behind.
            self.scanned += bytes;
            self.line.clear();
            self.skipping = false;
        }
    }

    /// Feeds the next chunk; `Some(reply)` once the reply is seen (stop reading then).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Option<Reply>, ToolError> {
        self.scanned += chunk.len() as u64;
        self.keep_tail(chunk);
        let mut rest = chunk;
        while !rest.is_empty() {
            let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                self.carry(rest)?;
                break;
            };
            let part = &rest[..end];
            rest = &rest[end + 1..];
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if !self.check_length(part)? {
                // Too long, and it ends here: the next line is read again.
                self.skipping = false;
                continue;
            }
            let reply = if self.line.is_empty() {
                self.line_done(part)?
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(part);
                self.line_done(&line)?
            };
            if reply.is_some() {
                return Ok(reply);
            }
        }
        if self.scanned > MAX_SCAN_BYTES {
            return Err(self.too_much());
        }
        Ok(None)
    }

    /// At the end of the output: the last line, if it had no newline.
    pub fn finish(&mut self) -> Result<Option<Reply>, ToolError> {
        if self.skipping {
            return Ok(None);
        }
        let line = std::mem::take(&mut self.line);
        self.line_done(&line)
    }

    /// The error when the reply was not found within the bound.
    fn too_much(&self) -> ToolError {
        if self.dropped > 0 {
            return self.overrun();
        }
        ToolError::execution(format!(
            "the MCP server wrote more than {} MiB without the reply to request {}",
            MAX_SCAN_BYTES >> 20,
            self.id
        ))
    }

    /// The error when the ring dropped output the bridge had not read.
    pub fn overrun(&self) -> ToolError {
        ToolError::execution(format!(
            "the MCP server wrote faster than the bridge could read ({} bytes dropped); its reply to request {} was not found",
            self.dropped, self.id
        ))
    }

    fn keep_tail(&mut self, chunk: &[u8]) {
        let take = chunk.len().min(TAIL_BYTES);
        self.tail.extend_from_slice(&chunk[chunk.len() - take..]);
        let excess = self.tail.len().saturating_sub(TAIL_BYTES);
        self.tail.drain(..excess);
    }

    /// Keeps the start of a line whose end is in a later chunk, or starts skipping it.
    fn carry(&mut self, part: &[u8]) -> Result<(), ToolError> {
        if self.skipping {
            return Ok(());
        }
        if self.check_length(part)? {
            self.line.extend_from_slice(part);
        }
        Ok(())
    }

    /// Whether the line being read stays within the bound with `part` added. Past it, the
    /// line is skipped (counted), unless its start holds the id: then it is the reply,
    /// too long (5000).
    fn check_length(&mut self, part: &[u8]) -> Result<bool, ToolError> {
        if self.line.len() + part.len() <= MAX_LINE_BYTES {
            return Ok(true);
        }
        let room = MAX_LINE_BYTES - self.line.len();
        self.line.extend_from_slice(&part[..room]);
        let ours = contains(&self.line, &self.needle);
        self.line = Vec::new();
        if ours {
            return Err(ToolError::execution(format!(
                "the MCP server's reply to request {} is longer than {} MiB, the most a stdio line may be",
                self.id,
                MAX_LINE_BYTES >> 20
            )));
        }
        self.oversized += 1;
        self.skipping = true;
        Ok(false)
    }

    /// A whole line: the reply, or `None` for anything else.
    fn line_done(&mut self, line: &[u8]) -> Result<Option<Reply>, ToolError> {
        if !contains(line, &self.needle) {
            return Ok(None);
        }
        let Ok(message) = serde_json::from_slice::<Value>(line.trim_ascii()) else {
            self.malformed += 1;
            return Ok(None);
        };
        if !message.is_object() {
            return Ok(None);
        }
        let reply = match_reply_to(&message, &self.id)?;
        if reply.is_none()
            && let Some(note) = note_for(&message, &self.id)
        {
            self.progress.push(note);
        }
        Ok(reply)
    }
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;

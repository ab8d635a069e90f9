//! One audit event as one JSON line: its fields written straight into one buffer (numbers
//! and booleans stay typed), with no map and no intermediate strings: the line is built on
//! the calling thread, once per call (ARCHITECTURE.md, "The audit sink").

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};

/// `{"ts":"…",<the event's fields>}\n`.
pub(super) fn of_event(event: &tracing::Event<'_>) -> Vec<u8> {
    let mut line = Line(Vec::with_capacity(384));
    line.0.extend_from_slice(b"{\"ts\":\"");
    push_timestamp(&mut line.0);
    line.0.push(b'"');
    event.record(&mut line);
    line.0.extend_from_slice(b"}\n");
    line.0
}

struct Line(Vec<u8>);

impl Line {
    fn key(&mut self, field: &Field) {
        self.0.extend_from_slice(b",\"");
        escape_into(&mut self.0, field.name());
        self.0.extend_from_slice(b"\":");
    }

    fn string(&mut self, text: &str) {
        self.0.push(b'"');
        escape_into(&mut self.0, text);
        self.0.push(b'"');
    }
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        self.string(value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.0, "{value}");
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.0
            .extend_from_slice(if value { b"true" } else { b"false" });
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.key(field);
        self.0.push(b'"');
        // Escaped as it is formatted: no String per field.
        let _ = write!(JsonText(&mut self.0), "{value:?}");
        self.0.push(b'"');
    }
}

/// Formatting that lands JSON-escaped in a line.
struct JsonText<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for JsonText<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        escape_into(self.0, text);
        Ok(())
    }
}

/// Which bytes a JSON string cannot hold as they are (RFC 8259, section 7).
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Appends `text` as the inside of a JSON string: `"`, `\` and the control characters
/// escaped, every other character as it is. A plain run is copied in one piece (a table
/// lookup per byte: Wharf's own crates build at opt-level 1 for the tests, where an
/// iterator chain per byte costs calls).
fn escape_into(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if !NEEDS_ESCAPE[usize::from(byte)] {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                let _ = write!(out, "\\u{byte:04x}");
            }
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

thread_local! {
    /// The second this thread last stamped, as `(unix seconds, "YYYY-MM-DDTHH:MM:SS")`:
    /// a busy host formats the date once a second per thread, not once per line.
    static SECOND: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
}

/// Appends UTC now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn push_timestamp(out: &mut Vec<u8>) {
    let now = chrono::Utc::now();
    let seconds = now.timestamp();
    // A leap second reports 1000..1999 ms; the line stays well-formed.
    let millis = now.timestamp_subsec_millis().min(999);
    let cached = SECOND.with(|cell| {
        let Ok(mut second) = cell.try_borrow_mut() else {
            return false;
        };
        if second.0 != seconds || second.1.is_empty() {
            second.1 = now.format("%Y-%m-%dT%H:%M:%S").to_string();
            second.0 = seconds;
        }
        out.extend_from_slice(second.1.as_bytes());
        true
    });
    if !cached {
        let _ = write!(out, "{}", now.format("%Y-%m-%dT%H:%M:%S"));
    }
    let _ = write!(out, ".{millis:03}Z");
}

#[cfg(test)]
mod tests {
    use super::{escape_into, push_timestamp};

    #[test]
    fn escaped_text_reads_back_as_the_same_string() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        for text in [
            "",
            "plain",
            "quote \" and backslash \\ and slash /",
            "line\nbreak\r\ttab",
            &all_controls,
            "\u{7f} del, é, 日本, \u{2028}, 🦀",
            "\\u0000 looks escaped but is not",
        ] {
            let mut out = b"\"".to_vec();
            escape_into(&mut out, text);
            out.push(b'"');
            let back: String = serde_json::from_slice(&out).unwrap_or_else(|e| {
                panic!("{text:?} gave {:?}: {e}", String::from_utf8_lossy(&out))
            });
            assert_eq!(back, text);
        }
    }

    #[test]
    fn a_timestamp_is_rfc3339_with_milliseconds_in_utc() {
        for _ in 0..3 {
            let mut out = Vec::new();
            push_timestamp(&mut out);
            let text = String::from_utf8(out).unwrap();
            assert_eq!(text.len(), "2026-12-01T22:40:00.123Z".len(), "{text}");
            let parsed = chrono::DateTime::parse_from_rfc3339(&text).unwrap();
            let age = chrono::Utc::now().signed_duration_since(parsed);
            assert!(
                age >= chrono::TimeDelta::zero() && age < chrono::TimeDelta::seconds(5),
                "{text}"
            );
        }
    }
}

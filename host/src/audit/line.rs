//! One audit event as one JSON line: its fields written straight into one buffer (numbers
//! and booleans stay typed), with no map and no intermediate strings. A tracing event's
//! line is built on the calling thread; a deferred line ([`LineBuilder`]) on the writer's
//! (ARCHITECTURE.md, "The audit sink").

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};

/// `{"ts":"…",<the event's fields>}\n`.
pub(super) fn of_event(event: &tracing::Event<'_>) -> Vec<u8> {
    let mut line = LineBuilder::at(chrono::Utc::now());
    event.record(&mut line);
    line.finish()
}

/// A line written field by field: `{"ts":"…"`, then each field, then `}` and a newline
/// ([`LineBuilder::finish`]). Keys and strings are JSON-escaped.
pub struct LineBuilder(Vec<u8>);

impl LineBuilder {
    /// A line stamped `at` (UTC, milliseconds).
    pub fn at(at: chrono::DateTime<chrono::Utc>) -> Self {
        let mut line = Vec::with_capacity(384);
        line.extend_from_slice(b"{\"ts\":\"");
        push_timestamp(&mut line, at);
        line.push(b'"');
        Self(line)
    }

    /// Adds `"key":"text"`.
    pub fn text(&mut self, key: &str, text: &str) -> &mut Self {
        self.key_named(key);
        self.string(text);
        self
    }

    /// Adds `"key":number`.
    pub fn number(&mut self, key: &str, number: u64) -> &mut Self {
        self.key_named(key);
        self.digits(number);
        self
    }

    /// The line: the closing brace and a newline.
    pub fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(b"}\n");
        self.0
    }

    fn key(&mut self, field: &Field) {
        self.key_named(field.name());
    }

    fn digits(&mut self, number: impl itoa::Integer) {
        self.0
            .extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
    }

    fn key_named(&mut self, name: &str) {
        self.0.extend_from_slice(b",\"");
        escape_into(&mut self.0, name);
        self.0.extend_from_slice(b"\":");
    }

    fn string(&mut self, text: &str) {
        self.0.push(b'"');
        escape_into(&mut self.0, text);
        self.0.push(b'"');
    }
}

impl Visit for LineBuilder {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        self.string(value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        self.digits(value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        self.digits(value);
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

/// Whether any of the eight bytes of `word` is one [`NEEDS_ESCAPE`] names: below 0x20,
/// `"` or `\` (the classic "has a zero byte" and "has a byte below n" bit tricks).
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    below_space | quote | backslash != 0
}

/// Appends `text` as the inside of a JSON string: `"`, `\` and the control characters
/// escaped, every other character as it is. A plain run is copied in one piece, found
/// eight bytes at a time where it can be, else by a table lookup per byte.
fn escape_into(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8)
            && let Ok(chunk) = <[u8; 8]>::try_from(chunk)
            && !word_needs_escape(u64::from_ne_bytes(chunk))
        {
            i += 8;
            continue;
        }
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

/// Appends `now` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn push_timestamp(out: &mut Vec<u8>, now: chrono::DateTime<chrono::Utc>) {
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
    let digit = |n: u32| b'0' + u8::try_from(n % 10).unwrap_or(0);
    out.extend_from_slice(&[
        b'.',
        digit(millis / 100),
        digit(millis / 10),
        digit(millis),
        b'Z',
    ]);
}

#[cfg(test)]
mod tests {
    use super::{LineBuilder, NEEDS_ESCAPE, escape_into, push_timestamp, word_needs_escape};

    #[test]
    fn the_word_test_agrees_with_the_byte_table() {
        for fill in [b'a', b' ', b'~', 0x80, 0xe6, 0xff, b'!', b'#', b'[', b']'] {
            for byte in 0..=255u8 {
                for at in 0..8 {
                    let mut word = [fill; 8];
                    word[at] = byte;
                    let expected =
                        NEEDS_ESCAPE[usize::from(byte)] || NEEDS_ESCAPE[usize::from(fill)];
                    assert_eq!(
                        word_needs_escape(u64::from_ne_bytes(word)),
                        expected,
                        "{word:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_built_line_is_one_json_object_with_its_fields() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-02T16:00:01.234Z")
            .unwrap()
            .to_utc();
        let mut line = LineBuilder::at(at);
        line.text("event", "tool_call")
            .text("args", "{\"q\":\"a\\\"b\nc\u{1}\"}")
            .number("code", u64::MAX);
        let bytes = line.finish();
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["ts"], "2026-12-02T16:00:01.234Z");
        assert_eq!(v["event"], "tool_call");
        assert_eq!(v["args"], "{\"q\":\"a\\\"b\nc\u{1}\"}");
        assert_eq!(v["code"], u64::MAX);
    }

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
            "a run of plain text longer than a word, then \" and more plain text after it",
            "ends in a control after a long plain run\u{1f}",
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
            push_timestamp(&mut out, chrono::Utc::now());
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

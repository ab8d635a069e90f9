//! Keeps secret values out of what the bridge returns: a server may echo the token it was
//! sent (in an error, a tool's text), and that must not reach a caller or a log line. Every
//! secret value sent is remembered by name, and replaced by `[secret:NAME]` on the way out.

use wharf_sdk::{ToolError, Value};

/// Values shorter than this are not searched for (they would match ordinary text).
const MIN_LEN: usize = 4;
/// The most values remembered (a rotated secret adds one each time).
const MAX_REMEMBERED: usize = 64;

/// The secret values sent so far, by name.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    seen: Vec<(String, String)>,
}

impl Redactor {
    /// Remembers that `value` was sent as the secret `name`.
    pub fn remember(&mut self, name: &str, value: &str) {
        if value.len() < MIN_LEN || self.seen.iter().any(|(_, v)| v == value) {
            return;
        }
        if self.seen.len() == MAX_REMEMBERED {
            self.seen.remove(0);
        }
        self.seen.push((name.to_string(), value.to_string()));
    }

    /// `text` with every remembered value replaced by `[secret:NAME]`.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.seen {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[secret:{name}]"));
            }
        }
        out
    }

    /// The error with its message redacted.
    pub fn error(&self, mut error: ToolError) -> ToolError {
        error.message = self.text(&error.message);
        error
    }

    /// The value with every string in it (keys too) redacted.
    pub fn value(&self, value: Value) -> Value {
        if self.seen.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.text(&k), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wharf_sdk::json;

    #[test]
    fn echoed_secrets_are_replaced_by_their_name() {
        let mut r = Redactor::default();
        r.remember("mcp_token", "tok-SECRET-1234");
        r.remember("short", "abc");
        let e = r.error(ToolError::execution("bad token Bearer tok-SECRET-1234!"));
        assert_eq!(e.message, "bad token Bearer [secret:mcp_token]!");
        let v = r.value(json!({"a": ["x tok-SECRET-1234"], "tok-SECRET-1234": 1, "n": 2}));
        assert_eq!(
            v,
            json!({"a": ["x [secret:mcp_token]"], "[secret:mcp_token]": 1, "n": 2})
        );
        assert_eq!(r.text("abc stays"), "abc stays");
    }

    #[test]
    fn a_rotated_secret_keeps_both_values_and_the_memory_is_bounded() {
        let mut r = Redactor::default();
        r.remember("t", "old-value");
        r.remember("t", "new-value");
        r.remember("t", "new-value");
        assert_eq!(r.text("old-value new-value"), "[secret:t] [secret:t]");
        for i in 0..100 {
            r.remember("t", &format!("value-{i}"));
        }
        assert_eq!(r.seen.len(), MAX_REMEMBERED);
        assert_eq!(r.text("value-99"), "[secret:t]");
    }
}

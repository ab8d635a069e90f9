//! Tool arguments checked against the tool's JSON Schema before a backend runs: a missing
//! required field is 4003, anything else that fails the schema is 4004.
//!
//! A schema comes from a guest, so its `pattern`s are hostile input: they are compiled
//! with the `regex` crate's engine (no backtracking: matching is linear in the text),
//! under size limits, never with the default backtracking engine, whose look-around and
//! back-references let one pattern hold a worker for seconds per string. A schema whose
//! pattern needs those features is refused when the backend loads.

use crate::error_code::{Code, WharfError};
use anyhow::{Result, anyhow};
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// A compiled validator for one tool's arguments.
pub struct ArgsValidator {
    validator: jsonschema::Validator,
}

/// At most this many problems are listed in one error message.
const MAX_LISTED: usize = 5;

/// The largest compiled pattern (the `regex` crate's approximate program size), bytes.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The largest lazy-DFA cache one pattern may keep, bytes.
const PATTERN_DFA_LIMIT: usize = 1 << 20;

/// Arguments with more than this many bytes of strings and keys (or this many values) are
/// validated on a blocking thread under the call's deadline rather than on an async
/// worker.
pub const INLINE_VALIDATION_BUDGET: usize = 16 * 1024;

impl ArgsValidator {
    /// Compiles `schema` with the linear-time pattern engine; external references are not
    /// fetched.
    pub fn new(schema: &Value) -> Result<Self> {
        let validator = jsonschema::options()
            .with_pattern_options(
                jsonschema::PatternOptions::regex()
                    .size_limit(PATTERN_SIZE_LIMIT)
                    .dfa_size_limit(PATTERN_DFA_LIMIT),
            )
            .build(schema)
            .map_err(|e| {
                anyhow!("{e} (patterns are matched without backtracking: look-around and back-references are not supported)")
            })?;
        Ok(Self { validator })
    }

    /// Checks `args`.
    pub fn validate(&self, args: &Value) -> Result<(), WharfError> {
        if !args.is_object() {
            return Err(WharfError::new(
                Code::InvalidType,
                "`args` must be a JSON object",
            ));
        }
        if self.validator.is_valid(args) {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut invalid = Vec::new();
        for error in self.validator.iter_errors(args) {
            match error.kind() {
                ValidationErrorKind::Required { property } => {
                    let path = error.instance_path().to_string();
                    let name = property
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| property.to_string());
                    missing.push(if path.is_empty() {
                        name
                    } else {
                        format!("{path}/{name}")
                    });
                }
                _ => {
                    let path = error.instance_path().to_string();
                    let at = if path.is_empty() {
                        "args".to_string()
                    } else {
                        path
                    };
                    invalid.push(format!("{at}: {error}"));
                }
            }
        }
        refuse(
            missing,
            Code::MissingField,
            "missing required field(s)",
            "missing",
            ", ",
        )?;
        refuse(
            invalid,
            Code::InvalidType,
            "invalid arguments",
            "errors",
            "; ",
        )
    }
}

/// `code` naming the first [`MAX_LISTED`] of `listed` (joined with `separator` after
/// `what`, and as `data.{key}`), or nothing when `listed` is empty.
fn refuse(
    mut listed: Vec<String>,
    code: Code,
    what: &str,
    key: &str,
    separator: &str,
) -> Result<(), WharfError> {
    if listed.is_empty() {
        return Ok(());
    }
    listed.truncate(MAX_LISTED);
    Err(
        WharfError::new(code, format!("{what}: {}", listed.join(separator)))
            .with_data(serde_json::json!({ key: listed })),
    )
}

/// Whether `value` holds more than `budget` bytes of strings and keys, or more than
/// `budget` values; stops walking as soon as it knows.
pub fn exceeds(value: &Value, budget: usize) -> bool {
    fn walk(value: &Value, left: &mut usize) -> bool {
        let cost = match value {
            Value::String(s) => s.len().max(1),
            _ => 1,
        };
        if cost >= *left {
            return true;
        }
        *left -= cost;
        match value {
            Value::Array(items) => items.iter().any(|v| walk(v, left)),
            Value::Object(map) => map.iter().any(|(k, v)| {
                if k.len() >= *left {
                    return true;
                }
                *left -= k.len();
                walk(v, left)
            }),
            _ => false,
        }
    }
    let mut left = budget;
    walk(value, &mut left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "text": { "type": "string" }, "times": { "type": "integer", "minimum": 1 } },
            "required": ["text"],
            "additionalProperties": false
        })
    }

    #[test]
    fn missing_is_4003_and_wrong_type_is_4004() {
        let v = ArgsValidator::new(&schema()).unwrap();
        assert!(v.validate(&json!({"text": "hi"})).is_ok());
        let e = v.validate(&json!({"times": 2})).unwrap_err();
        assert_eq!(e.code, Code::MissingField);
        assert!(e.message.contains("text"), "{}", e.message);
        let e = v.validate(&json!({"text": 5})).unwrap_err();
        assert_eq!(e.code, Code::InvalidType);
        assert!(e.message.contains("/text"), "{}", e.message);
        assert_eq!(
            v.validate(&json!({"text": "a", "extra": 1}))
                .unwrap_err()
                .code,
            Code::InvalidType
        );
        assert_eq!(v.validate(&json!([1])).unwrap_err().code, Code::InvalidType);
    }

    #[test]
    fn backtracking_patterns_are_refused_at_compile_time() {
        for pattern in [r"^(a|aa)+(?!b)$", r"^(\w+)\1$", r"(?<=x)y"] {
            let schema = json!({"type": "object", "properties": {"t": {"type": "string", "pattern": pattern}}});
            let e = ArgsValidator::new(&schema)
                .err()
                .unwrap_or_else(|| panic!("{pattern} compiled"));
            assert!(
                format!("{e:#}").contains("backtracking"),
                "{pattern}: {e:#}"
            );
        }
    }

    #[test]
    fn a_pathological_pattern_is_linear_on_a_long_string() {
        // Exponential for a backtracking engine on "aaaa…b"; linear here.
        let schema = json!({"type": "object", "properties": {"t": {"type": "string", "pattern": "^(a|aa)+$"}}});
        let v = ArgsValidator::new(&schema).unwrap();
        let text = format!("{}b", "a".repeat(60_000));
        assert_eq!(
            v.validate(&json!({ "t": text })).unwrap_err().code,
            Code::InvalidType
        );
        assert!(v.validate(&json!({ "t": "a".repeat(60_000) })).is_ok());
    }

    #[test]
    fn exceeds_stops_at_the_budget() {
        assert!(!exceeds(&json!({"a": "xy", "b": [1, 2]}), 100));
        assert!(exceeds(&json!({"a": "x".repeat(200)}), 100));
        assert!(exceeds(&json!((0..200).collect::<Vec<_>>()), 100));
        assert!(exceeds(&json!({"k".repeat(200): 1}), 100));
    }
}

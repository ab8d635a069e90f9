//! Tool arguments checked against the tool's JSON Schema before a backend runs: a missing
//! required field is 4003, anything else that fails the schema is 4004.

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

impl ArgsValidator {
    /// Compiles `schema`; external references are not fetched.
    pub fn new(schema: &Value) -> Result<Self> {
        let validator = jsonschema::validator_for(schema).map_err(|e| anyhow!("{e}"))?;
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
        if !missing.is_empty() {
            missing.truncate(MAX_LISTED);
            return Err(WharfError::new(
                Code::MissingField,
                format!("missing required field(s): {}", missing.join(", ")),
            )
            .with_data(serde_json::json!({ "missing": missing })));
        }
        if !invalid.is_empty() {
            invalid.truncate(MAX_LISTED);
            return Err(WharfError::new(
                Code::InvalidType,
                format!("invalid arguments: {}", invalid.join("; ")),
            )
            .with_data(serde_json::json!({ "errors": invalid })));
        }
        Ok(())
    }
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
}

//! The one error type of a container engine, and how it maps onto the code table.

use crate::error_code::{Code, WharfError};

/// A failed container engine operation. Each variant maps to one code of the table (ARCHITECTURE.md, the code table)
/// through [`EngineError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The container (or file, image, exec) does not exist, or is not the caller's: another
    /// backend's container answers exactly like a missing one. Code 4000.
    #[error("not found: {0}")]
    NotFound(String),
    /// The engine cannot be reached, timed out, or answered with a server error. Code 5012;
    /// a retry may help.
    #[error("docker unavailable: {0}")]
    Unavailable(String),
    /// The request is malformed (bad path, empty command, bad env name...). Code 4000.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// Policy refuses it (network `host` or `container:*`, a guest `wharf.*` label). Code 4030.
    #[error("refused: {0}")]
    Refused(String),
    /// The content is larger than the caller's limit. Code 4013.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The engine refused the operation for another reason (a conflict, a container that
    /// is not running...). Code 5000.
    #[error("docker operation failed: {0}")]
    Failed(String),
    /// The host has no container engine at all (none configured, or it could not be set
    /// up at start). Code 5012; a retry does not help.
    #[error("no container engine is configured on this host")]
    NotConfigured,
}

impl EngineError {
    /// The numeric code of the table (ARCHITECTURE.md, the code table) for this error.
    pub fn code(&self) -> u32 {
        match self {
            EngineError::NotFound(_) | EngineError::Invalid(_) => 4000,
            EngineError::Refused(_) => 4030,
            EngineError::TooLarge(_) => 4013,
            EngineError::Unavailable(_) | EngineError::NotConfigured => 5012,
            EngineError::Failed(_) => 5000,
        }
    }

    /// Whether the same request, retried later, can succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, EngineError::Unavailable(_))
    }
}

impl From<EngineError> for WharfError {
    fn from(err: EngineError) -> WharfError {
        let code = Code::from_u32(err.code()).unwrap_or(Code::ExecutionError);
        let retryable = err.retryable();
        WharfError::new(code, err.to_string()).retryable(retryable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_table() {
        assert_eq!(EngineError::NotFound("x".into()).code(), 4000);
        assert_eq!(EngineError::Invalid("x".into()).code(), 4000);
        assert_eq!(EngineError::Refused("x".into()).code(), 4030);
        assert_eq!(EngineError::TooLarge("x".into()).code(), 4013);
        assert_eq!(EngineError::Unavailable("x".into()).code(), 5012);
        assert_eq!(EngineError::Failed("x".into()).code(), 5000);
        assert_eq!(EngineError::NotConfigured.code(), 5012);
        assert!(!EngineError::NotConfigured.retryable());
        assert!(
            EngineError::NotFound("x".into())
                .to_string()
                .contains("not found")
        );
    }
}

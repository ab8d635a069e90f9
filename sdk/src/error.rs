//! The error a tool or hook returns, with a code from Wharf's table.

use crate::bindings::wit_types;
use serde_json::Value;

/// The codes a backend may return: 4000–4004, 4006, 4007, 4030, 5000, 5006 and 5012. The
/// host answers any other code (4005, 5001–5005, its own codes, a custom 4242) as 5000 and
/// logs the backend's name with the code it returned.
pub mod codes {
    /// The arguments make no sense for this tool.
    pub const INVALID_INPUT: u32 = 4000;
    /// The tool ran and said no.
    pub const BUSINESS_FAILURE: u32 = 4001;
    /// The request itself was malformed.
    pub const INVALID_REQUEST: u32 = 4002;
    /// A required field is missing.
    pub const MISSING_FIELD: u32 = 4003;
    /// A parameter has the wrong type.
    pub const INVALID_TYPE: u32 = 4004;
    /// Nothing matched.
    pub const NO_RESULTS: u32 = 4006;
    /// The session is unknown or not initialized.
    pub const SESSION_NOT_FOUND: u32 = 4007;
    /// Not allowed: a grant the operator has not given (pass on the host's 4030).
    pub const FORBIDDEN: u32 = 4030;
    /// The tool failed.
    pub const EXECUTION_ERROR: u32 = 5000;
    /// The tool ran out of time.
    pub const TIMEOUT: u32 = 5006;
    /// Something the tool depends on (a service, Docker) is down; retrying later can help.
    pub const DEPENDENCY_FAILURE: u32 = 5012;

    /// Every code a backend may return, in order.
    pub const ALLOWED: &[u32] = &[
        INVALID_INPUT,
        BUSINESS_FAILURE,
        INVALID_REQUEST,
        MISSING_FIELD,
        INVALID_TYPE,
        NO_RESULTS,
        SESSION_NOT_FOUND,
        FORBIDDEN,
        EXECUTION_ERROR,
        TIMEOUT,
        DEPENDENCY_FAILURE,
    ];
}

/// A failure with a code from the table, a message a person can act on, whether a retry
/// can help, and optional JSON details.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Code from [`codes`].
    pub code: u32,
    /// One sentence a person can act on.
    pub message: String,
    /// Whether the same call, retried, can succeed.
    pub retryable: bool,
    /// Optional details.
    pub data: Option<Value>,
}

impl ToolError {
    /// An error with an explicit code, one of [`codes::ALLOWED`] (see [`codes`]); the host
    /// answers any other code as 5000 and logs it.
    ///
    /// ```
    /// use wharf_sdk::{ToolError, codes};
    /// let err = ToolError::new(codes::DEPENDENCY_FAILURE, "the tracker API is down").retryable();
    /// assert_eq!(err.code, 5012);
    /// ```
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: false,
            data: None,
        }
    }
    /// 4000: the arguments make no sense for this tool.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_INPUT, message)
    }
    /// 4001: the tool ran and said no.
    pub fn business(message: impl Into<String>) -> Self {
        Self::new(codes::BUSINESS_FAILURE, message)
    }
    /// 4006: nothing matched.
    pub fn no_results(message: impl Into<String>) -> Self {
        Self::new(codes::NO_RESULTS, message)
    }
    /// 4007: the session is unknown, gone or not initialized.
    pub fn session_not_found(message: impl Into<String>) -> Self {
        Self::new(codes::SESSION_NOT_FOUND, message)
    }
    /// 4030: not allowed (a grant is missing).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(codes::FORBIDDEN, message)
    }
    /// 5012: a dependency is down; retryable.
    pub fn dependency(message: impl Into<String>) -> Self {
        Self::new(codes::DEPENDENCY_FAILURE, message).retryable()
    }
    /// 5000: the tool failed.
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(codes::EXECUTION_ERROR, message)
    }
    /// 5006: the tool ran out of time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(codes::TIMEOUT, message).retryable()
    }
    /// Marks the error as worth retrying.
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }
    /// Attaches JSON details.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ToolError {}

impl From<serde_json::Error> for ToolError {
    fn from(err: serde_json::Error) -> Self {
        ToolError::invalid_input(format!("invalid JSON: {err}"))
    }
}

impl From<wit_types::Error> for ToolError {
    fn from(err: wit_types::Error) -> Self {
        Self {
            code: err.code,
            message: err.message,
            retryable: err.retryable,
            data: err.data.and_then(|d| serde_json::from_str(&d).ok()),
        }
    }
}

impl From<ToolError> for wit_types::Error {
    fn from(err: ToolError) -> Self {
        Self {
            code: err.code,
            message: err.message,
            retryable: err.retryable,
            data: err.data.map(|d| d.to_string()),
        }
    }
}

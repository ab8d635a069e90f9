//! The one error-code table (listed in ARCHITECTURE.md): every code, its HTTP status, and the error type
//! that carries a code through the host to the API edge.

use serde::Serialize;
use serde_json::Value;

/// A code from the table. `Success` is 0; the rest are failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// 0
    Success,
    /// 4000 invalid input
    InvalidInput,
    /// 4001 the tool ran and said no
    BusinessFailure,
    /// 4002 invalid request format, unknown or ambiguous tool
    InvalidRequest,
    /// 4003 missing required field
    MissingField,
    /// 4004 invalid parameter type
    InvalidType,
    /// 4006 no results
    NoResults,
    /// 4007 session not found / not yours / not initialized
    SessionNotFound,
    /// 4010 unauthorized
    Unauthorized,
    /// 4013 body over the limit
    PayloadTooLarge,
    /// 4030 forbidden: scope, grants, or a request from a place the host does not serve
    Forbidden,
    /// 4150 the body is not of the route's documented content type
    UnsupportedMediaType,
    /// 4090 held by another holder
    Conflict,
    /// 4290 quota or rate limit
    RateLimited,
    /// 4990 cancelled by the client
    Cancelled,
    /// 5000 the tool failed
    ExecutionError,
    /// 5006 timeout
    Timeout,
    /// 5009 batch: every action failed
    BatchAllFailed,
    /// 5010 batch: some actions failed
    BatchPartialFailure,
    /// 5011 backend not loaded / not ready
    BackendUnavailable,
    /// 5012 dependency failure
    DependencyFailure,
    /// 5013 internal error (a trap)
    Internal,
}

const TABLE: &[(Code, u32, u16)] = &[
    (Code::Success, 0, 200),
    (Code::InvalidInput, 4000, 400),
    (Code::BusinessFailure, 4001, 400),
    (Code::InvalidRequest, 4002, 400),
    (Code::MissingField, 4003, 400),
    (Code::InvalidType, 4004, 400),
    (Code::NoResults, 4006, 200),
    (Code::SessionNotFound, 4007, 404),
    (Code::Unauthorized, 4010, 401),
    (Code::PayloadTooLarge, 4013, 413),
    (Code::Forbidden, 4030, 403),
    (Code::UnsupportedMediaType, 4150, 415),
    (Code::Conflict, 4090, 409),
    (Code::RateLimited, 4290, 429),
    (Code::Cancelled, 4990, 499),
    (Code::ExecutionError, 5000, 500),
    (Code::Timeout, 5006, 504),
    (Code::BatchAllFailed, 5009, 500),
    (Code::BatchPartialFailure, 5010, 207),
    (Code::BackendUnavailable, 5011, 503),
    (Code::DependencyFailure, 5012, 503),
    (Code::Internal, 5013, 500),
];

impl Code {
    fn row(self) -> (Code, u32, u16) {
        TABLE
            .iter()
            .copied()
            .find(|(c, _, _)| *c == self)
            .unwrap_or((self, 5013, 500))
    }
    /// The numeric code sent to clients.
    pub fn as_u32(self) -> u32 {
        self.row().1
    }
    /// The HTTP status that goes with the code.
    pub fn http_status(self) -> u16 {
        self.row().2
    }
    /// What the code means, in a few words (the table in ARCHITECTURE.md).
    pub fn summary(self) -> &'static str {
        match self {
            Code::Success => "success",
            Code::InvalidInput => "invalid input",
            Code::BusinessFailure => "the tool ran and said no",
            Code::InvalidRequest => "invalid request format, unknown or ambiguous tool or backend",
            Code::MissingField => "missing required field",
            Code::InvalidType => "invalid parameter type or out-of-range number",
            Code::NoResults => "no results",
            Code::SessionNotFound => "session not found (or the tool needs one)",
            Code::Unauthorized => "unauthorized: no or a bad bearer token",
            Code::PayloadTooLarge => "payload too large",
            Code::Forbidden => "forbidden: a grant, a scope, an allowlist, a Host or Origin",
            Code::UnsupportedMediaType => "unsupported media type",
            Code::Conflict => "conflict",
            Code::RateLimited => "rate limited (Retry-After)",
            Code::Cancelled => "cancelled by the client",
            Code::ExecutionError => "execution error",
            Code::Timeout => "timeout",
            Code::BatchAllFailed => "batch: every action failed",
            Code::BatchPartialFailure => "batch: some actions failed",
            Code::BackendUnavailable => "backend unavailable or busy (Retry-After)",
            Code::DependencyFailure => "a dependency failed or is absent",
            Code::Internal => "internal error",
        }
    }
    /// Every code of the table, in its order.
    pub fn all() -> impl Iterator<Item = Code> {
        TABLE.iter().map(|(c, _, _)| *c)
    }
    /// The code with this number, if it is in the table.
    pub fn from_u32(n: u32) -> Option<Code> {
        TABLE.iter().find(|(_, v, _)| *v == n).map(|(c, _, _)| *c)
    }
    /// Maps a code a backend returned: the codes in [`BACKEND_CODES`] pass; anything else
    /// (4005, 5001–5005, the host's own codes, which a backend must not forge) becomes 5000.
    pub fn from_backend(n: u32) -> Code {
        if BACKEND_CODES.contains(&n) {
            Code::from_u32(n).unwrap_or(Code::ExecutionError)
        } else {
            Code::ExecutionError
        }
    }
}

/// The codes a backend may return (ARCHITECTURE.md's code table and the SDK's `codes` list the same set):
/// 4000–4004, 4006, 4007, 4030 (a provider refusing a spec it cannot enforce, or a grant
/// denial the backend passes on), 5000, 5006 and 5012 (a dependency such as Docker is down).
pub const BACKEND_CODES: &[u32] = &[
    4000, 4001, 4002, 4003, 4004, 4006, 4007, 4030, 5000, 5006, 5012,
];

/// The schema of a code on the wire: an integer from the table.
impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<u32> = TABLE.iter().map(|(_, n, _)| *n).collect();
        schemars::json_schema!({
            "type": "integer",
            "enum": codes,
            "description": "0 success; 4000-4990 the caller's; 5000-5013 the backend's or a dependency's (the table is in ARCHITECTURE.md)",
        })
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.as_u32())
    }
}

/// A failure with a code from the table, a message a person can act on, whether a retry
/// can help, and optional details. This is what the API edge turns into an envelope.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} ({})", code.as_u32())]
pub struct WharfError {
    /// Code from the table.
    pub code: Code,
    /// One sentence a person can act on.
    pub message: String,
    /// Whether the same request, retried, can succeed.
    pub retryable: bool,
    /// Optional details.
    pub data: Option<Value>,
}

impl WharfError {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        let retryable = matches!(
            code,
            Code::Timeout
                | Code::BackendUnavailable
                | Code::DependencyFailure
                | Code::RateLimited
                | Code::Conflict
        );
        Self {
            code,
            message: message.into(),
            retryable,
            data: None,
        }
    }
    /// Attaches details.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    /// Attaches details when there are some.
    pub fn with_data_opt(mut self, data: Option<Value>) -> Self {
        self.data = data;
        self
    }
    /// Overrides whether a retry can help.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }
    /// 4002.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidRequest, message)
    }
    /// 4007.
    pub fn session_not_found(message: impl Into<String>) -> Self {
        Self::new(Code::SessionNotFound, message)
    }
    /// 4030.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(Code::Forbidden, message)
    }
    /// 5011.
    pub fn backend_unavailable(message: impl Into<String>) -> Self {
        Self::new(Code::BackendUnavailable, message)
    }
    /// 5013.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_status() {
        assert_eq!(Code::NoResults.http_status(), 200);
        assert_eq!(Code::SessionNotFound.http_status(), 404);
        assert_eq!(Code::BatchPartialFailure.http_status(), 207);
        assert_eq!(Code::Cancelled.http_status(), 499);
        for (code, n, _) in TABLE {
            assert_eq!(Code::from_u32(*n), Some(*code));
        }
    }

    #[test]
    fn backends_cannot_forge_host_codes() {
        assert_eq!(Code::from_backend(4001), Code::BusinessFailure);
        assert_eq!(Code::from_backend(5006), Code::Timeout);
        assert_eq!(Code::from_backend(5013), Code::ExecutionError);
        assert_eq!(Code::from_backend(4030), Code::Forbidden);
        assert_eq!(Code::from_backend(5012), Code::DependencyFailure);
        assert_eq!(Code::from_backend(4010), Code::ExecutionError);
        assert_eq!(Code::from_backend(5011), Code::ExecutionError);
        assert_eq!(Code::from_backend(4005), Code::ExecutionError);
        assert_eq!(Code::from_backend(0), Code::ExecutionError);
        assert_eq!(Code::from_backend(123456), Code::ExecutionError);
    }
}

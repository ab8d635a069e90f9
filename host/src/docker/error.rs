//! The one error type of the Docker module, and how engine errors map onto it.

use crate::error_code::{Code, WharfError};

/// A failed Docker operation. Each variant maps to one code of the table (ARCHITECTURE.md, the code table)
/// through [`DockerError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerError {
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
}

impl DockerError {
    /// The numeric code of the table (ARCHITECTURE.md, the code table) for this error.
    pub fn code(&self) -> u32 {
        match self {
            DockerError::NotFound(_) | DockerError::Invalid(_) => 4000,
            DockerError::Refused(_) => 4030,
            DockerError::TooLarge(_) => 4013,
            DockerError::Unavailable(_) => 5012,
            DockerError::Failed(_) => 5000,
        }
    }

    /// Whether the same request, retried later, can succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, DockerError::Unavailable(_))
    }

    /// Maps an engine or transport error. `what` names the object of the operation, so a
    /// 404 reads "not found: container 1234..." rather than the engine's wording.
    pub(crate) fn from_bollard(err: bollard::errors::Error, what: &str) -> DockerError {
        use bollard::errors::Error as E;
        match err {
            E::DockerResponseServerError {
                status_code,
                message,
            } => {
                let message = message.trim().to_string();
                match status_code {
                    404 => DockerError::NotFound(format!("{what}: {message}")),
                    400 => DockerError::Invalid(format!("{what}: {message}")),
                    403 => DockerError::Refused(format!("{what}: {message}")),
                    409 => DockerError::Failed(format!("{what}: {message}")),
                    500..=599 => DockerError::Unavailable(format!("{what}: {message}")),
                    _ => DockerError::Failed(format!("{what}: HTTP {status_code}: {message}")),
                }
            }
            E::RequestTimeoutError => DockerError::Unavailable(format!(
                "{what}: the docker engine did not answer in time"
            )),
            E::SocketNotFoundError(path) => {
                DockerError::Unavailable(format!("docker socket {path} does not exist"))
            }
            e @ (E::IOError { .. }
            | E::HyperResponseError { .. }
            | E::HyperLegacyError { .. }
            | E::HttpClientError { .. }) => {
                DockerError::Unavailable(format!("{what}: cannot reach the docker engine: {e}"))
            }
            other => DockerError::Failed(format!("{what}: {other}")),
        }
    }
}

impl From<DockerError> for WharfError {
    fn from(err: DockerError) -> WharfError {
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
        assert_eq!(DockerError::NotFound("x".into()).code(), 4000);
        assert_eq!(DockerError::Invalid("x".into()).code(), 4000);
        assert_eq!(DockerError::Refused("x".into()).code(), 4030);
        assert_eq!(DockerError::TooLarge("x".into()).code(), 4013);
        assert_eq!(DockerError::Unavailable("x".into()).code(), 5012);
        assert_eq!(DockerError::Failed("x".into()).code(), 5000);
        assert!(
            DockerError::NotFound("x".into())
                .to_string()
                .contains("not found")
        );
    }

    #[test]
    fn engine_statuses_map() {
        let e = |status_code, m: &str| bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: m.to_string(),
        };
        assert!(matches!(
            DockerError::from_bollard(e(404, "no such"), "c"),
            DockerError::NotFound(_)
        ));
        assert!(matches!(
            DockerError::from_bollard(e(400, "bad"), "c"),
            DockerError::Invalid(_)
        ));
        assert!(matches!(
            DockerError::from_bollard(e(500, "boom"), "c"),
            DockerError::Unavailable(_)
        ));
        assert!(matches!(
            DockerError::from_bollard(e(409, "conflict"), "c"),
            DockerError::Failed(_)
        ));
        let wharf: WharfError = DockerError::Unavailable("down".into()).into();
        assert_eq!(wharf.code, Code::DependencyFailure);
        assert!(wharf.retryable);
    }
}

//! How bollard's errors map onto the engine error ([`DockerError`], the engine-neutral
//! [`EngineError`](crate::engines::EngineError) under the Docker module's name).

pub use crate::engines::EngineError as DockerError;

impl DockerError {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::{Code, WharfError};

    #[test]
    fn engine_statuses_map() {
        let e = |status_code, m: &str| bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: m.to_string(),
        };
        for (status, expected) in [
            (404, DockerError::NotFound("c: m".into())),
            (400, DockerError::Invalid("c: m".into())),
            (500, DockerError::Unavailable("c: m".into())),
            (409, DockerError::Failed("c: m".into())),
        ] {
            assert_eq!(DockerError::from_bollard(e(status, "m"), "c"), expected);
        }
        let wharf: WharfError = DockerError::Unavailable("down".into()).into();
        assert_eq!(wharf.code, Code::DependencyFailure);
        assert!(wharf.retryable);
    }
}

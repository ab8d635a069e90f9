//! The connection: endpoint, lazy client with API-version negotiation, timeouts, and the
//! ownership check every per-container operation starts with.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bollard::models::ContainerInspectResponse;
use tokio::sync::OnceCell;

use super::agent_link::EngineLinks;
use super::command_starts::CommandStarts;
use super::egress_registry::EgressLinks;
use super::error::DockerError;
use super::known_agents::KnownAgents;
use super::labels::{check_owner, is_full_id, is_owners, shorten};
use super::runtimes::IsolationRuntimes;
use super::sandbox_agent::AgentPlacement;
use super::shell_pool::ShellPool;
use super::types::Owner;

/// Where the engine listens when `DOCKER_HOST` is not set.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// bollard's own per-request ceiling (seconds, to the response headers); every call is
/// also bounded by a shorter timeout of its own.
const CLIENT_TIMEOUT_SECS: u64 = 600;
/// How long the first contact (version negotiation) may take before the engine counts as
/// unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Limit of an ordinary call (inspect, create, list, remove...).
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    Unix(String),
    Http(String),
}

/// An engine over TCP: bollard's HTTP client, with `TCP_NODELAY` (the engine's side has it,
/// as Go sets it on every connection). Without it a sandbox's engine link, small frames
/// each way, waits for the engine's delayed ACK: measured 44 ms a command instead of 1.7
/// (88 ms with each frame in two writes).
fn connect_over_tcp(
    addr: &str,
    version: &bollard::ClientVersion,
) -> Result<bollard::Docker, bollard::errors::Error> {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let mut builder =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
    builder.pool_max_idle_per_host(0);
    let client = Arc::new(builder.build(connector));
    let host = addr
        .trim_start_matches("tcp://")
        .trim_start_matches("http://");
    bollard::Docker::connect_with_custom_transport(
        move |request: bollard::BollardRequest| {
            let client = Arc::clone(&client);
            async move {
                client
                    .request(request)
                    .await
                    .map_err(bollard::errors::Error::from)
            }
        },
        Some(format!("http://{host}")),
        CLIENT_TIMEOUT_SECS,
        version,
    )
}

impl Endpoint {
    fn parse(s: &str) -> Result<Endpoint, DockerError> {
        let s = s.trim();
        if let Some(path) = s.strip_prefix("unix://") {
            if path.is_empty() {
                return Err(DockerError::Invalid("empty unix socket path".into()));
            }
            Ok(Endpoint::Unix(path.to_string()))
        } else if s.starts_with('/') {
            Ok(Endpoint::Unix(s.to_string()))
        } else if let Some(addr) = s
            .strip_prefix("tcp://")
            .or_else(|| s.strip_prefix("http://"))
        {
            if addr.is_empty() {
                return Err(DockerError::Invalid("empty docker host address".into()));
            }
            Ok(Endpoint::Http(addr.trim_end_matches('/').to_string()))
        } else {
            Err(DockerError::Invalid(format!(
                "unsupported docker endpoint {s:?} (use unix://PATH, tcp://HOST:PORT or http://HOST:PORT)"
            )))
        }
    }

    fn describe(&self) -> String {
        match self {
            Endpoint::Unix(path) => format!("unix://{path}"),
            Endpoint::Http(addr) => format!("tcp://{addr}"),
        }
    }
}

/// An async Docker client scoped by owner: every operation on a container checks that the
/// caller's backend created it (`wharf.backend`), and every container it creates carries
/// the host's labels. Cheap to clone; the engine is contacted on first use (and again
/// after a failure), so the host can start before Docker does.
#[derive(Clone)]
pub struct Docker {
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: Endpoint,
    node_id: String,
    client: OnceCell<bollard::Docker>,
    shells: ShellPool,
    agent: std::sync::OnceLock<AgentPlacement>,
    agents: KnownAgents,
    starts: CommandStarts,
    links: EngineLinks,
    runtimes: std::sync::OnceLock<IsolationRuntimes>,
    egress: EgressLinks,
}

/// No runtime mapped: `container` only, on the engine's default runtime.
static DEFAULT_RUNTIMES: IsolationRuntimes = IsolationRuntimes::none();

impl std::fmt::Debug for Docker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Docker")
            .field("endpoint", &self.inner.endpoint.describe())
            .field("node_id", &self.inner.node_id)
            .field("connected", &self.inner.client.initialized())
            .finish()
    }
}

impl Docker {
    /// The local engine: `DOCKER_HOST` when set, else the default unix socket. `node_id`
    /// goes into the `wharf.node` label. Does not contact the engine.
    pub fn connect(node_id: &str) -> Result<Self, DockerError> {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_string());
        Self::connect_to(&host, node_id)
    }

    /// A given engine: `unix:///path`, `/path`, `tcp://host:port` or `http://host:port`.
    /// Does not contact the engine: an unreachable one answers `Unavailable` on the first
    /// call, within a few seconds.
    pub fn connect_to(socket_or_url: &str, node_id: &str) -> Result<Self, DockerError> {
        let endpoint = Endpoint::parse(socket_or_url)?;
        if node_id.is_empty() || node_id.chars().any(char::is_control) {
            return Err(DockerError::Invalid(
                "node id must be non-empty text".into(),
            ));
        }
        Ok(Docker {
            inner: Arc::new(Inner {
                endpoint,
                node_id: node_id.to_string(),
                client: OnceCell::new(),
                shells: ShellPool::default(),
                agent: std::sync::OnceLock::new(),
                agents: KnownAgents::default(),
                starts: CommandStarts::default(),
                links: EngineLinks::default(),
                runtimes: std::sync::OnceLock::new(),
                egress: EgressLinks::default(),
            }),
        })
    }

    /// The node id written to the `wharf.node` label.
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    /// Puts the sandbox agent into every container this client creates from now on:
    /// bind-mounted from this host on a local engine, copied into each container through
    /// the engine's archive API on one elsewhere (reached through the engine, then). Set
    /// once; a second placement is ignored.
    pub fn place_agent(&self, placement: AgentPlacement) {
        let placement = if matches!(self.inner.endpoint, Endpoint::Unix(_)) {
            placement
        } else {
            tracing::info!(
                "the docker engine is remote: the sandbox agent is copied into each sandbox and reached through the engine"
            );
            placement.copied()
        };
        let _ = self.inner.agent.set(placement);
    }

    /// Maps isolation levels to this engine's runtimes (`[server.runtimes]`). Set once; a
    /// second map is refused.
    pub fn map_runtimes(
        &self,
        mapped: std::collections::BTreeMap<crate::policy::Isolation, String>,
    ) -> Result<(), DockerError> {
        self.inner
            .runtimes
            .set(IsolationRuntimes::new(mapped)?)
            .map_err(|_| DockerError::Invalid("runtimes are already mapped".into()))
    }

    /// The isolation levels this engine is configured to give.
    pub fn isolation_levels(&self) -> Vec<crate::policy::Isolation> {
        self.runtimes().levels()
    }

    /// Whether the engine runs on this machine (reached over a Unix socket): its volumes'
    /// files are then in this host's filesystem.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self.inner.endpoint, Endpoint::Unix(_))
    }

    pub(crate) fn runtimes(&self) -> &IsolationRuntimes {
        self.inner.runtimes.get().unwrap_or(&DEFAULT_RUNTIMES)
    }

    /// Where the sandbox agent is placed from, when containers get one.
    pub(crate) fn agent_placement(&self) -> Option<&AgentPlacement> {
        self.inner.agent.get()
    }

    /// The agents of the containers this client has talked to.
    pub(crate) fn known_agents(&self) -> &KnownAgents {
        &self.inner.agents
    }

    /// The start slots of the commands run through this engine's agents.
    pub(crate) fn command_starts(&self) -> &CommandStarts {
        &self.inner.starts
    }

    /// The engine links of the containers whose agent this client reaches through the
    /// engine.
    pub(crate) fn engine_links(&self) -> &EngineLinks {
        &self.inner.links
    }

    /// The egress links of the containers this client serves.
    pub(crate) fn egress(&self) -> &EgressLinks {
        &self.inner.egress
    }

    /// The idle resident shells of the containers this client runs commands in.
    pub(crate) fn shells(&self) -> &ShellPool {
        &self.inner.shells
    }

    /// Checks the engine answers.
    pub async fn ping(&self) -> Result<(), DockerError> {
        let api = self.api().await?;
        self.run("ping", CONNECT_TIMEOUT, api.ping())
            .await
            .map(|_| ())
    }

    /// The connected client, negotiating the API version on first use (bollard speaks a
    /// newer API than many engines accept). A failure is not cached.
    pub(crate) async fn api(&self) -> Result<bollard::Docker, DockerError> {
        let endpoint = &self.inner.endpoint;
        let client = self
            .inner
            .client
            .get_or_try_init(|| async {
                let version = bollard::API_DEFAULT_VERSION;
                let client = match endpoint {
                    Endpoint::Unix(path) => {
                        bollard::Docker::connect_with_unix(path, CLIENT_TIMEOUT_SECS, version)
                    }
                    Endpoint::Http(addr) => connect_over_tcp(addr, version),
                }
                .map_err(|e| DockerError::from_bollard(e, "connect"))?;
                match tokio::time::timeout(CONNECT_TIMEOUT, client.negotiate_version()).await {
                    Ok(Ok(client)) => Ok(client),
                    Ok(Err(e)) => Err(match DockerError::from_bollard(e, "connect") {
                        DockerError::Unavailable(m) => DockerError::Unavailable(m),
                        other => DockerError::Unavailable(format!(
                            "{} at {}",
                            other,
                            endpoint.describe()
                        )),
                    }),
                    Err(_) => Err(DockerError::Unavailable(format!(
                        "docker engine at {} did not answer within {} s",
                        endpoint.describe(),
                        CONNECT_TIMEOUT.as_secs()
                    ))),
                }
            })
            .await?;
        Ok(client.clone())
    }

    /// Runs one engine call under `limit`, mapping its errors.
    pub(crate) async fn run<T>(
        &self,
        what: &str,
        limit: Duration,
        call: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, DockerError> {
        match tokio::time::timeout(limit, call).await {
            Ok(result) => result.map_err(|e| DockerError::from_bollard(e, what)),
            Err(_) => Err(DockerError::Unavailable(format!(
                "{what}: the docker engine did not answer within {} s",
                limit.as_secs()
            ))),
        }
    }

    /// Like [`Docker::run`], with `None` when the engine answers that the object is not
    /// there.
    pub(crate) async fn run_found<T>(
        &self,
        what: &str,
        limit: Duration,
        call: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<Option<T>, DockerError> {
        match self.run(what, limit, call).await {
            Ok(found) => Ok(Some(found)),
            Err(DockerError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The container if it exists and `owner`'s backend created it; `None` otherwise (a
    /// missing container and another backend's look the same).
    pub(crate) async fn inspect_owned(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<ContainerInspectResponse>, DockerError> {
        check_owner(owner)?;
        if !is_full_id(id) {
            return Ok(None);
        }
        let api = self.api().await?;
        let found = self
            .run_found(
                "inspect container",
                OP_TIMEOUT,
                api.inspect_container(id, None),
            )
            .await?;
        Ok(found.filter(|found| is_owners(found, owner, id)))
    }

    /// Like [`Docker::inspect_owned`], with `NotFound` for `None`.
    pub(crate) async fn require_owned(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<ContainerInspectResponse, DockerError> {
        self.inspect_owned(owner, id)
            .await?
            .ok_or_else(|| DockerError::NotFound(format!("container {}", shorten(id))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(
            Endpoint::parse("unix:///var/run/docker.sock"),
            Ok(Endpoint::Unix("/var/run/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("/tmp/d.sock"),
            Ok(Endpoint::Unix("/tmp/d.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:2375"),
            Ok(Endpoint::Http("127.0.0.1:2375".into()))
        );
        assert!(matches!(
            Endpoint::parse("ssh://x"),
            Err(DockerError::Invalid(_))
        ));
        assert!(matches!(
            Endpoint::parse("unix://"),
            Err(DockerError::Invalid(_))
        ));
    }
}

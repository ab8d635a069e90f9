//! Plain data types of a container engine: what a caller asks for and what it gets back.
//! They belong to no engine and to no contract version (not the WIT bindings); the import
//! layer converts, and every engine (`docker`, later others) speaks them.

// The labels every engine puts on what it creates (the sweeper, the reaper and the warm
// pool find containers by them, whichever engine made them).

/// Label with the owning backend's name. Every container Wharf creates carries it.
pub const LABEL_BACKEND: &str = "wharf.backend";
/// Label with the session the container was created in (absent outside a session).
pub const LABEL_SESSION: &str = "wharf.session";
/// Label with the id of the Wharf node that created the container.
pub const LABEL_NODE: &str = "wharf.node";
/// Label with the backend whose warm pool made the container (ARCHITECTURE.md, "Warm
/// sandboxes"); set when the session label is a pool id.
pub const LABEL_POOL: &str = "wharf.pool";
/// Label on a container whose PID 1 is the sandbox agent (`wharf-sandboxd`): commands and
/// processes in it go through the agent's socket, not the engine's exec.
pub const LABEL_AGENT: &str = "wharf.agent";
/// Label with the user an agent-run container's own processes run as (the agent itself is
/// root): commands that take the engine's exec run as this user too.
pub const LABEL_USER: &str = "wharf.user";
/// Label with a container's egress rule (JSON), when its egress goes through the host's
/// proxy; written by the host only, read again after a restart.
pub const LABEL_EGRESS: &str = "wharf.egress";
/// The session id prefix of a warm pool's sandboxes (session ids are UUIDs: never this).
pub const POOL_SESSION_PREFIX: &str = "wharf-pool-";
/// The prefix reserved to the host.
pub const RESERVED_PREFIX: &str = "wharf.";
/// Label with the volume id on an engine volume the host made for a tenant (issue 37).
pub const LABEL_VOLUME: &str = "wharf.volume";
/// Label with the tenant on an engine volume the host made.
pub const LABEL_VOLUME_TENANT: &str = "wharf.volume.tenant";
/// Label with the creation time (ms since the Unix epoch) on an engine volume the host made.
pub const LABEL_VOLUME_CREATED: &str = "wharf.volume.created";

/// Who is calling: the operator's name of the backend, and its current session if any.
/// The host derives both from the call context; a guest never names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The backend's name (the `wharf.backend` label of everything it creates).
    pub backend: String,
    /// The session the call runs in (the `wharf.session` label), if any.
    pub session: Option<String>,
}

impl Owner {
    /// An owner outside any session.
    pub fn backend(backend: impl Into<String>) -> Self {
        Owner {
            backend: backend.into(),
            session: None,
        }
    }

    /// An owner inside a session.
    pub fn session(backend: impl Into<String>, session: impl Into<String>) -> Self {
        Owner {
            backend: backend.into(),
            session: Some(session.into()),
        }
    }
}

/// A host directory bind-mounted into a container. Whether the backend may mount it is
/// the grants check's business, done before this module is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute path on the host; it must exist (it is not created).
    pub host_path: String,
    /// Absolute path in the container.
    pub container_path: String,
    /// Mount read-only.
    pub read_only: bool,
}

/// A named volume mounted into a container: an engine volume the host resolved from a
/// tenant's volume name (a guest never names engine volumes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The engine's volume name.
    pub volume: String,
    /// Absolute path in the container.
    pub container_path: String,
    /// Mount read-only.
    pub read_only: bool,
}

/// A container that uses an engine volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeUser {
    /// The container's id.
    pub container: String,
    /// The session of its `wharf.session` label, when it has one.
    pub session: Option<String>,
    /// Whether it mounts the volume read-only (everywhere it mounts it).
    pub read_only: bool,
}

/// An engine volume the host made, as the sweep sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineVolume {
    /// The engine's volume name.
    pub name: String,
    /// The volume id of its `wharf.volume` label.
    pub volume: String,
    /// The node that made it (its `wharf.node` label).
    pub node: Option<String>,
    /// Creation time, ms since the Unix epoch (its `wharf.volume.created` label; 0 when
    /// absent).
    pub created_at_ms: u64,
}

/// The network a container joins. Defaults to [`Network::None`]: no network at all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// No network interface but loopback.
    #[default]
    None,
    /// Docker's default bridge (note: it reaches the host's link-local metadata address).
    Bridge,
    /// A named user network. `host` and `container:*` are always refused.
    Named(String),
}

/// What to create. Everything not set here is the image's default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerSpec {
    /// Image reference; it must already be present locally (nothing is pulled here).
    pub image: String,
    /// Replaces the image's `CMD` (the entrypoint is kept).
    pub command: Option<Vec<String>>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub workdir: Option<String>,
    /// The guest's own labels; a `wharf.*` key is refused (the host writes those).
    pub labels: Vec<(String, String)>,
    /// Host bind mounts.
    pub mounts: Vec<Mount>,
    /// Named engine volumes (the host resolved them; never a guest's choice).
    pub volumes: Vec<VolumeMount>,
    /// Network; `None` by default.
    pub network: Network,
    /// CPU limit in thousandths of a CPU (1500 = 1.5 CPUs).
    pub cpu_millis: Option<u32>,
    /// Memory limit in bytes (swap is not added on top).
    pub memory_bytes: Option<u64>,
    /// Maximum number of processes.
    pub pids_limit: Option<u32>,
    /// Mount the root filesystem read-only.
    pub read_only_root: bool,
    /// Container path of a writable anonymous volume (e.g. `/work`), removed with the
    /// container. With `read_only_root`, this is where files can be copied in.
    pub work_volume: Option<String>,
    /// The isolation level (the engine maps it to a runtime, or refuses it).
    pub isolation: crate::policy::Isolation,
    /// The user the container's processes run as (`name`, `uid`, `name:group`); `None`:
    /// the image's.
    pub user: Option<String>,
    /// Egress only through the host's proxy, under this rule: the container gets no
    /// network, its agent a loopback listener the host relays, and `HTTP_PROXY` pointing
    /// at it. `None`: the network above.
    pub egress: Option<crate::policy::EgressRule>,
}

/// The state of a container, as the engine reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    /// Created, never started.
    Created,
    /// Running (or restarting).
    Running,
    /// Paused.
    Paused,
    /// Stopped.
    Exited,
    /// Dead or being removed.
    Dead,
    /// Anything the engine did not say clearly.
    Unknown,
}

/// A container the caller may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Full 64-hex id.
    pub id: String,
    /// Name, without Docker's leading `/`.
    pub name: String,
    /// The image reference it was created from.
    pub image: String,
    /// Current state.
    pub state: ContainerState,
    /// Every label, the host's `wharf.*` ones included, sorted by key.
    pub labels: Vec<(String, String)>,
    /// Creation time, milliseconds since the Unix epoch (0 when unknown).
    pub created_at_ms: u64,
    /// The owning backend (`wharf.backend`).
    pub backend: String,
    /// The session it was created in (`wharf.session`), if any.
    pub session: Option<String>,
}

impl ContainerInfo {
    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A command to run in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Executed directly: the first element is the program.
    Argv(Vec<String>),
    /// Run by `/bin/sh -c`.
    Shell(String),
}

/// One command to run in a running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// Full id of a container the caller owns.
    pub container: String,
    /// What to run.
    pub command: Command,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory (the container's by default).
    pub workdir: Option<String>,
    /// User (`name`, `uid`, `uid:gid`); the container's by default.
    pub user: Option<String>,
    /// Written to the command's standard input, which is then closed. `None`: no stdin.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit; past it the whole process group is killed. Must be > 0.
    pub timeout_ms: u32,
    /// How many bytes of stdout and of stderr (each) are kept: the last ones.
    pub max_output_bytes: u32,
}

impl ExecRequest {
    /// A request with no env, workdir, user or stdin.
    pub fn new(
        container: impl Into<String>,
        command: Command,
        timeout_ms: u32,
        max_output_bytes: u32,
    ) -> Self {
        ExecRequest {
            container: container.into(),
            command,
            env: Vec::new(),
            workdir: None,
            user: None,
            stdin: None,
            timeout_ms,
            max_output_bytes,
        }
    }
}

/// The result of [`ExecRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Exit code; `None` when the command was killed for its timeout.
    pub exit_code: Option<i32>,
    /// The last `max_output_bytes` of standard output.
    pub stdout: Vec<u8>,
    /// The last `max_output_bytes` of standard error.
    pub stderr: Vec<u8>,
    /// Standard output was longer than what is kept.
    pub stdout_truncated: bool,
    /// Standard error was longer than what is kept.
    pub stderr_truncated: bool,
    /// The command ran past `timeout_ms` and was killed.
    pub timed_out: bool,
    /// Wall-clock time of the whole call, in milliseconds.
    pub duration_ms: u64,
}

/// The background-process vocabulary of the sandbox agent, shared as it is (a leaf crate).
pub use wharf_sandbox_protocol::{OutputChunk, ProcessInfo, Signal, TerminalSize};

/// A background process to start in a running container's sandbox agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStart {
    /// What to run.
    pub command: Command,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory (the container's by default).
    pub workdir: Option<String>,
    /// User (`name`, `uid`, `uid:gid`); root by default.
    pub user: Option<String>,
    /// Bytes of output kept; 0 means the agent's default.
    pub buffer_bytes: u32,
    /// Run it on a terminal of this size (its stdout and stderr are then one stream).
    pub terminal: Option<TerminalSize>,
}

/// Reads a background process's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputRead {
    /// The process.
    pub pid: u32,
    /// The first byte wanted.
    pub offset: u64,
    /// At most this many bytes.
    pub max_bytes: u32,
    /// How long to wait for output when there is none yet.
    pub wait_ms: u32,
}

/// Bytes both ways to a port inside a sandbox.
pub trait PortIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> PortIo for T {}

/// One connection to a port inside a sandbox ([`ContainerEngine::connect_port`](super::ContainerEngine::connect_port)).
pub type PortStream = Box<dyn PortIo>;

/// The image a snapshot of a container is committed to, named and labelled by the host
/// (never by a guest): `wharf-snapshot:<snapshot id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotTarget {
    /// The image reference, `repository:tag`.
    pub image: String,
    /// The host's labels on it (`wharf.snapshot`, its tenant, backend and origin).
    pub labels: Vec<(String, String)>,
}

/// A snapshot image the engine holds, as the sweep sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotImage {
    /// The image id.
    pub id: String,
    /// The snapshot id of its `wharf.snapshot` label.
    pub snapshot: String,
    /// The node that made it (its `wharf.node` label).
    pub node: Option<String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
}

/// The snapshot the host asked of one provider call (`suspension.snapshot`): the image the
/// provider's `freezer.commit` writes, once, and what it added.
#[derive(Debug)]
pub struct SnapshotAsk {
    target: SnapshotTarget,
    taken: std::sync::atomic::AtomicBool,
    bytes: std::sync::atomic::AtomicU64,
}

impl SnapshotAsk {
    /// A call that may commit one container to `target`.
    pub fn new(target: SnapshotTarget) -> Self {
        Self {
            target,
            taken: std::sync::atomic::AtomicBool::new(false),
            bytes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The target, the first time it is asked for; `None` after (one commit per call).
    pub fn take(&self) -> Option<&SnapshotTarget> {
        let first = !self.taken.swap(true, std::sync::atomic::Ordering::AcqRel);
        first.then_some(&self.target)
    }

    /// Records what the commit added.
    pub fn committed(&self, bytes: u64) {
        self.bytes
            .store(bytes, std::sync::atomic::Ordering::Release);
    }

    /// Whether a commit was made, and what it added.
    pub fn outcome(&self) -> Option<u64> {
        self.taken
            .load(std::sync::atomic::Ordering::Acquire)
            .then(|| self.bytes.load(std::sync::atomic::Ordering::Acquire))
    }
}

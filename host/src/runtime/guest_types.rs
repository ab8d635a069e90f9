//! The host's own types for what crosses into and out of a guest, one set for every
//! contract version: each version's generated records convert into these (and back) by
//! the conversions in `guest_types/from_bindings`.

mod from_bindings;

use crate::tool::{Attachment, SessionNeed, ToolAnnotations};
use serde_json::Value;

/// A failure a guest returned.
#[derive(Debug, Clone)]
pub struct GuestError {
    /// The code it chose (the host clamps it to the codes a backend may use).
    pub code: u32,
    /// Its message.
    pub message: String,
    /// Whether it says a retry can help.
    pub retryable: bool,
    /// Details, as JSON text.
    pub data: Option<String>,
}

/// What a guest call answers: a trap (outer) or the guest's own result (inner).
pub type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

/// A generated binding's answer in the host's types: its value and its error converted.
pub fn answer<T, U: Into<T>, E: Into<GuestError>>(
    returned: wasmtime::Result<Result<U, E>>,
) -> Answer<T> {
    returned.map(|r| r.map(Into::into).map_err(Into::into))
}

/// [`answer`] for a list: each item converted.
pub fn answer_list<T, U: Into<T>, E: Into<GuestError>>(
    returned: wasmtime::Result<Result<Vec<U>, E>>,
) -> Answer<Vec<T>> {
    returned.map(|r| {
        r.map(|items| items.into_iter().map(Into::into).collect())
            .map_err(Into::into)
    })
}

/// A session as handed to a backend.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// Session id.
    pub id: String,
    /// Caller's key.
    pub key: String,
    /// Session data.
    pub data: Value,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// Expiry, ms since the epoch.
    pub expires_at_ms: Option<u64>,
}

/// The discovery verdict for a stored session.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    /// Usable.
    Alive,
    /// Usable with repaired data.
    AliveWith(Value),
    /// Gone.
    Gone,
}

/// What a tool call returned, before its JSON is parsed.
#[derive(Debug, Clone)]
pub struct RawToolOutput {
    /// The result, JSON text.
    pub content: String,
    /// Binary outputs.
    pub attachments: Vec<Attachment>,
    /// New session data, JSON text.
    pub session_data: Option<String>,
}

/// One tool as a component declares it.
#[derive(Debug, Clone)]
pub struct RawToolSpec {
    /// Action name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema text of the arguments.
    pub input_schema: String,
    /// JSON Schema text of the result.
    pub output_schema: Option<String>,
    /// Session need.
    pub session: SessionNeed,
    /// Hints.
    pub annotations: ToolAnnotations,
}

pub use crate::requires::Requires;

/// What a resource backend says about itself.
#[derive(Debug, Clone)]
pub struct RawBackendInfo {
    /// Declared name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Description.
    pub description: String,
    /// Tools.
    pub tools: Vec<RawToolSpec>,
    /// Operator config schema, JSON text.
    pub config_schema: Option<String>,
    /// Session config schema, JSON text.
    pub session_config_schema: Option<String>,
    /// Declared capabilities.
    pub requires: Requires,
}

/// The native operations a provider implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderFeatures {
    /// `read-file`.
    pub read_file: bool,
    /// `write-file`.
    pub write_file: bool,
    /// `list-dir`.
    pub list_dir: bool,
    /// `run-command` takes stdin.
    pub stdin: bool,
    /// Sandboxes may be created ahead of time for a warm pool (0.2.0 and later).
    pub poolable: bool,
    /// Background processes (0.3.0's `processes` export answers `available`).
    pub processes: bool,
    /// Pausing and resuming sandboxes (0.3.0's `suspension` export answers `available`).
    pub suspension: bool,
}

impl ProviderFeatures {
    /// The features' names, as `/v1/backends` shows them.
    pub fn names(&self) -> Vec<String> {
        [
            (self.read_file, "read-file"),
            (self.write_file, "write-file"),
            (self.list_dir, "list-dir"),
            (self.stdin, "stdin"),
            (self.poolable, "poolable"),
            (self.processes, "processes"),
            (self.suspension, "suspension"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| name.to_string())
        .collect()
    }
}

/// What a sandbox provider says about itself.
#[derive(Debug, Clone)]
pub struct RawProviderInfo {
    /// Declared name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Description.
    pub description: String,
    /// Native features.
    pub features: ProviderFeatures,
    /// Declared capabilities.
    pub requires: Requires,
}

/// Egress a sandbox must enforce.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetworkPolicy {
    /// No network at all.
    pub block_network: bool,
    /// Hosts it may reach.
    pub allow_egress_to: Vec<String>,
    /// Ranges it may reach.
    pub allow_egress_to_cidrs: Vec<String>,
}

/// What a session asks a provider for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SandboxSpec {
    /// Image (`None`: the provider's default).
    pub image: Option<String>,
    /// Environment.
    pub env: Vec<(String, String)>,
    /// Egress.
    pub network: NetworkPolicy,
    /// Milli-CPUs.
    pub cpu_millis: Option<u32>,
    /// Bytes.
    pub memory_bytes: Option<u64>,
    /// Longest life, s.
    pub lifetime_seconds: Option<u32>,
    /// Owner recorded on the sandbox.
    pub owner: Option<String>,
    /// Working directory.
    pub workdir: Option<String>,
    /// The isolation level asked for (`None`: the backend's first granted level). Not in
    /// the contract's spec: the host applies it to the containers the provider creates.
    pub isolation: Option<crate::policy::Isolation>,
    /// The user the sandbox's processes run as (host-applied, like `isolation`).
    pub user: Option<String>,
    /// A read-only root filesystem (host-applied, like `isolation`).
    pub read_only_root: bool,
}

/// One command for a sandbox.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// Shell command line.
    pub command: String,
    /// Standard input (feature `stdin`).
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit, ms.
    pub timeout_ms: u32,
    /// Per stream; the tail is kept.
    pub max_output_bytes: u32,
}

/// What a command did.
#[derive(Debug, Clone, Default)]
pub struct CommandResult {
    /// `None` when it was killed.
    pub exit_code: Option<i32>,
    /// Standard output (its tail when truncated).
    pub stdout: Vec<u8>,
    /// Standard error (its tail when truncated).
    pub stderr: Vec<u8>,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
    /// Whether it ran past its limit.
    pub timed_out: bool,
    /// The sandbox is gone.
    pub sandbox_terminated: bool,
}

/// A slice of a file.
#[derive(Debug, Clone)]
pub struct FileChunk {
    /// Bytes from the offset asked for.
    pub data: Vec<u8>,
    /// The whole file's size as the provider reports it.
    pub total_size: u64,
}

/// The type of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Regular file.
    File,
    /// Directory.
    Directory,
    /// Symbolic link.
    Symlink,
    /// Anything else.
    Other,
}

/// One entry of a listed directory.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
}

/// Discovery as a guest answered it, before its JSON is parsed.
#[derive(Debug, Clone)]
pub enum RawDiscovery {
    /// Usable.
    Alive,
    /// Usable with repaired data (JSON text).
    AliveWith(String),
    /// Gone.
    Gone,
}

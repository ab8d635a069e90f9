//! The host's own types for what crosses into and out of a guest, one set for every
//! contract version: each version's generated records convert into these (and back) by
//! the conversions at the bottom, written once for all versions by a macro because the
//! records have the same shape where the versions agree.

use crate::runtime::bindings::{v0_1, v0_2};
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

/// Capabilities a component declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Requires {
    /// Container images.
    pub images: Vec<String>,
    /// Outbound HTTP `host:port` patterns.
    pub http_hosts: Vec<String>,
    /// Docker networks.
    pub networks: Vec<String>,
    /// Host paths to mount.
    pub host_mounts: Vec<String>,
}

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

/// Conversions between one version's generated records and the host's types, for the
/// records whose shape every version shares. `$types` is the version's `types`
/// interface module, `$provider` its exported `provider` interface module.
macro_rules! shared_conversions {
    ($types:path, $provider:path) => {
        const _: () = {
            use $provider as p;
            use $types as t;

            impl From<t::Error> for GuestError {
                fn from(e: t::Error) -> Self {
                    Self {
                        code: e.code,
                        message: e.message,
                        retryable: e.retryable,
                        data: e.data,
                    }
                }
            }

            impl From<GuestError> for t::Error {
                fn from(e: GuestError) -> Self {
                    Self {
                        code: e.code,
                        message: e.message,
                        retryable: e.retryable,
                        data: e.data,
                    }
                }
            }

            impl From<&SessionView> for t::SessionInfo {
                fn from(s: &SessionView) -> Self {
                    Self {
                        id: s.id.clone(),
                        key: s.key.clone(),
                        data: s.data.to_string(),
                        created_at_ms: s.created_at_ms,
                        expires_at_ms: s.expires_at_ms,
                    }
                }
            }

            impl From<t::Discovery> for RawDiscovery {
                fn from(d: t::Discovery) -> Self {
                    match d {
                        t::Discovery::Alive => RawDiscovery::Alive,
                        t::Discovery::AliveWith(data) => RawDiscovery::AliveWith(data),
                        t::Discovery::Gone => RawDiscovery::Gone,
                    }
                }
            }

            impl From<t::ToolOutput> for RawToolOutput {
                fn from(o: t::ToolOutput) -> Self {
                    Self {
                        content: o.content,
                        attachments: o
                            .attachments
                            .into_iter()
                            .map(|a| Attachment {
                                name: a.name,
                                mime_type: a.mime_type,
                                data: a.data,
                            })
                            .collect(),
                        session_data: o.session_data,
                    }
                }
            }

            impl From<t::Capabilities> for Requires {
                fn from(c: t::Capabilities) -> Self {
                    Self {
                        images: c.images,
                        http_hosts: c.http_hosts,
                        networks: c.networks,
                        host_mounts: c.host_mounts,
                    }
                }
            }

            impl From<t::BackendInfo> for RawBackendInfo {
                fn from(i: t::BackendInfo) -> Self {
                    Self {
                        name: i.name,
                        version: i.version,
                        description: i.description,
                        tools: i
                            .tools
                            .into_iter()
                            .map(|t| RawToolSpec {
                                name: t.name,
                                description: t.description,
                                input_schema: t.input_schema,
                                output_schema: t.output_schema,
                                session: match t.session {
                                    t::SessionNeed::None => SessionNeed::None,
                                    t::SessionNeed::Required => SessionNeed::Required,
                                    t::SessionNeed::Optional => SessionNeed::Optional,
                                },
                                annotations: ToolAnnotations {
                                    read_only: t.annotations.read_only,
                                    destructive: t.annotations.destructive,
                                    idempotent: t.annotations.idempotent,
                                    open_world: t.annotations.open_world,
                                },
                            })
                            .collect(),
                        config_schema: i.config_schema,
                        session_config_schema: i.session_config_schema,
                        requires: i.requires.into(),
                    }
                }
            }

            impl From<&SandboxSpec> for p::SandboxSpec {
                fn from(s: &SandboxSpec) -> Self {
                    Self {
                        image: s.image.clone(),
                        env: s.env.clone(),
                        network: p::NetworkPolicy {
                            block_network: s.network.block_network,
                            allow_egress_to: s.network.allow_egress_to.clone(),
                            allow_egress_to_cidrs: s.network.allow_egress_to_cidrs.clone(),
                        },
                        cpu_millis: s.cpu_millis,
                        memory_bytes: s.memory_bytes,
                        lifetime_seconds: s.lifetime_seconds,
                        owner: s.owner.clone(),
                        workdir: s.workdir.clone(),
                    }
                }
            }

            impl From<&CommandRequest> for p::CommandRequest {
                fn from(r: &CommandRequest) -> Self {
                    Self {
                        command: r.command.clone(),
                        stdin: r.stdin.clone(),
                        timeout_ms: r.timeout_ms,
                        max_output_bytes: r.max_output_bytes,
                    }
                }
            }

            impl From<p::CommandResult> for CommandResult {
                fn from(r: p::CommandResult) -> Self {
                    Self {
                        exit_code: r.exit_code,
                        stdout: r.stdout,
                        stderr: r.stderr,
                        stdout_truncated: r.stdout_truncated,
                        stderr_truncated: r.stderr_truncated,
                        timed_out: r.timed_out,
                        sandbox_terminated: r.sandbox_terminated,
                    }
                }
            }

            impl From<p::FileChunk> for FileChunk {
                fn from(c: p::FileChunk) -> Self {
                    Self {
                        data: c.data,
                        total_size: c.total_size,
                    }
                }
            }

            impl From<p::DirEntry> for DirEntry {
                fn from(e: p::DirEntry) -> Self {
                    Self {
                        name: e.name,
                        kind: match e.kind {
                            p::EntryKind::File => EntryKind::File,
                            p::EntryKind::Directory => EntryKind::Directory,
                            p::EntryKind::Symlink => EntryKind::Symlink,
                            p::EntryKind::Other => EntryKind::Other,
                        },
                        size: e.size,
                    }
                }
            }
        };
    };
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

shared_conversions!(
    v0_1::backend::wharf::plugin::types,
    v0_1::provider::exports::wharf::plugin::provider
);
shared_conversions!(
    v0_2::backend::wharf::plugin::types,
    v0_2::provider::exports::wharf::plugin::provider
);

impl From<v0_1::provider::exports::wharf::plugin::provider::ProviderInfo> for RawProviderInfo {
    fn from(i: v0_1::provider::exports::wharf::plugin::provider::ProviderInfo) -> Self {
        use v0_1::provider::exports::wharf::plugin::provider::ProviderFeatures as F;
        // 0.1.0's `tags` flag has no counterpart: the host never called the tag functions.
        Self {
            name: i.name,
            version: i.version,
            description: i.description,
            features: ProviderFeatures {
                read_file: i.features.contains(F::READ_FILE),
                write_file: i.features.contains(F::WRITE_FILE),
                list_dir: i.features.contains(F::LIST_DIR),
                stdin: i.features.contains(F::STDIN),
                poolable: false,
            },
            requires: i.requires.into(),
        }
    }
}

impl From<v0_2::provider::exports::wharf::plugin::provider::ProviderInfo> for RawProviderInfo {
    fn from(i: v0_2::provider::exports::wharf::plugin::provider::ProviderInfo) -> Self {
        use v0_2::provider::exports::wharf::plugin::provider::ProviderFeatures as F;
        Self {
            name: i.name,
            version: i.version,
            description: i.description,
            features: ProviderFeatures {
                read_file: i.features.contains(F::READ_FILE),
                write_file: i.features.contains(F::WRITE_FILE),
                list_dir: i.features.contains(F::LIST_DIR),
                stdin: i.features.contains(F::STDIN),
                poolable: i.features.contains(F::POOLABLE),
            },
            requires: i.requires.into(),
        }
    }
}

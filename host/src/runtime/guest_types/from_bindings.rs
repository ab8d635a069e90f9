//! The conversions between each contract version's generated records (`v0_1`, `v0_2`)
//! and the host's own guest types, through one macro; where a record differs between
//! versions (a provider's features), a trait says what each version has.

use super::{
    CommandRequest, CommandResult, DirEntry, EntryKind, FileChunk, GuestError, ProviderFeatures,
    RawBackendInfo, RawDiscovery, RawProviderInfo, RawToolOutput, RawToolSpec, Requires,
    SandboxSpec, SessionView,
};
use crate::runtime::bindings::{v0_1, v0_2};
use crate::tool::{Attachment, SessionNeed, ToolAnnotations};

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

            impl From<t::ToolSpec> for RawToolSpec {
                fn from(t: t::ToolSpec) -> Self {
                    Self {
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
                    }
                }
            }

            impl From<t::BackendInfo> for RawBackendInfo {
                fn from(i: t::BackendInfo) -> Self {
                    Self {
                        name: i.name,
                        version: i.version,
                        description: i.description,
                        tools: i.tools.into_iter().map(Into::into).collect(),
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

            impl From<p::ProviderInfo> for RawProviderInfo {
                fn from(i: p::ProviderInfo) -> Self {
                    use p::ProviderFeatures as F;
                    Self {
                        name: i.name,
                        version: i.version,
                        description: i.description,
                        features: ProviderFeatures {
                            read_file: i.features.contains(F::READ_FILE),
                            write_file: i.features.contains(F::WRITE_FILE),
                            list_dir: i.features.contains(F::LIST_DIR),
                            stdin: i.features.contains(F::STDIN),
                            poolable: i.features.poolable(),
                            // Asked of the `processes` and `suspension` exports (0.3.0) by
                            // `describe`.
                            processes: false,
                            suspension: false,
                        },
                        requires: i.requires.into(),
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

shared_conversions!(
    v0_1::backend::wharf::plugin0_1_0::types,
    v0_1::provider::exports::wharf::plugin0_1_0::provider
);
shared_conversions!(
    v0_2::backend::wharf::plugin0_2_0::types,
    v0_2::provider::exports::wharf::plugin0_2_0::provider
);

/// Whether a version's provider features say its sandboxes may be made ahead of a session.
trait Poolable {
    fn poolable(&self) -> bool;
}

impl Poolable for v0_1::provider::exports::wharf::plugin0_1_0::provider::ProviderFeatures {
    /// 0.1.0 has no such flag (and its `tags` flag has no counterpart: the host never
    /// called the tag functions).
    fn poolable(&self) -> bool {
        false
    }
}

impl Poolable for v0_2::provider::exports::wharf::plugin0_2_0::provider::ProviderFeatures {
    fn poolable(&self) -> bool {
        self.contains(Self::POOLABLE)
    }
}

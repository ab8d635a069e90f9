//! A sandbox provider as loaded: its pool of instances and the provider contract as
//! typed host calls, whatever contract version it was built against — `create`,
//! `run-command`, `destroy`, `is-alive`, the native file operations its features declare,
//! background processes (feature `processes`) and pausing (feature `suspension`). The
//! sandbox toolset builds the standard tools and the session hooks on top of this
//! (`sandbox_toolset::ProviderBackend`).

use crate::engines::container_types::{OutputChunk, OutputRead, ProcessInfo, ProcessStart, Signal};
use crate::error_code::{Code, WharfError};
use crate::imports::services::HostServices;
use crate::policy::{EgressAsk, Grants, SandboxProfile};
use crate::runtime::backend::PoolWatch;
use crate::runtime::guest_call::{self, CallSite};
use crate::runtime::guest_types::{
    Answer, CommandRequest, CommandResult, DirEntry, FileChunk, GuestError, ProviderFeatures,
    SandboxSpec, answer, answer_list,
};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{InstancePool, PoolSettings, on_guest};
use crate::runtime::provider_guest::{ProviderExports, ProviderPre};
pub use crate::runtime::provider_processes::SuspendOp;
use crate::runtime::provider_processes::{Provider02, cannot_pause, refused};
use crate::runtime::resource_component::config_text;
use anyhow::Result;
use serde_json::Value;
use std::sync::Arc;
use wasmtime::Store;

/// A running sandbox provider.
pub struct ProviderComponent {
    features: ProviderFeatures,
    pool: Arc<InstancePool<ProviderPre>>,
}

impl ProviderComponent {
    /// Starts the pool (warming `settings.min` instances).
    pub async fn start(
        name: Arc<str>,
        pre: ProviderPre,
        features: ProviderFeatures,
        settings: PoolSettings,
        config: &Value,
        grants: Arc<Grants>,
        services: Arc<HostServices>,
    ) -> Result<Self> {
        let pool =
            InstancePool::start(name, pre, settings, config_text(config), grants, services).await?;
        Ok(Self { features, pool })
    }

    /// The operator's name for the provider.
    pub fn name(&self) -> &str {
        self.pool.name()
    }

    /// What it implements natively.
    pub fn features(&self) -> ProviderFeatures {
        self.features
    }

    /// The pool's settings (the hook timeout bounds each provider call by default).
    pub fn settings(&self) -> &PoolSettings {
        self.pool.settings()
    }

    /// A call of the host's own for `tenant` in session `session_id`, bounded by the hook
    /// timeout.
    pub fn hook_site<'a>(&self, tenant: &'a Arc<str>, session_id: &'a str) -> CallSite<'a> {
        CallSite::in_session(tenant, session_id, self.settings().hook_timeout)
    }

    /// Its instance pool, to watch.
    pub fn pool(&self) -> Arc<dyn PoolWatch> {
        self.pool.clone()
    }

    /// Stops taking calls and shuts the instances down.
    pub async fn drain(&self) {
        self.pool.drain().await
    }

    /// Runs `op` on the 0.3.0 export `export` picks from a pooled instance, or answers
    /// `missing` (4030) when the provider does not have it.
    async fn on_optional<G: Sync, T: Send>(
        &self,
        site: CallSite<'_>,
        export: impl FnOnce(&Provider02) -> Option<&G>,
        missing: fn() -> GuestError,
        op: impl AsyncFnOnce(&G, &mut Store<HostState>) -> Answer<T>,
    ) -> Result<T, WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            match exports.v0_2().and_then(export) {
                Some(g) => op(g, store).await,
                None => Ok(Err(missing())),
            }
        })
        .await
    }

    /// Provisions a sandbox for `session_id`; returns its handle. What the spec asks beyond
    /// the contract (isolation, user, read-only root, an egress allowlist) and what `grant`
    /// resolved (a snapshot image, volumes) the host applies to every container
    /// the provider creates in this call; a provider that created none could not have
    /// honoured it, so its sandbox is destroyed and the ask refused (4030).
    pub async fn create(
        &self,
        site: CallSite<'_>,
        spec: SandboxSpec,
        grant: crate::runtime::backend::SandboxGrant,
    ) -> Result<String, WharfError> {
        let egress = if spec.network.block_network {
            EgressAsk::default()
        } else {
            EgressAsk {
                hosts: spec.network.allow_egress_to.clone(),
                cidrs: spec.network.allow_egress_to_cidrs.clone(),
            }
        };
        let profile = Arc::new(
            SandboxProfile::new(spec.isolation, spec.user.clone(), spec.read_only_root)
                .with_egress(egress)
                .with_granted_image(grant.from_image)
                .with_volumes(grant.volumes),
        );
        let asked = CallSite {
            sandbox: Some(&profile),
            ..site
        };
        let handle: String = guest_call::run(&self.pool, asked, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_create(store, &(&spec).into()).await
            ))
        })
        .await?;
        if profile.asks_anything() && profile.applied() == 0 {
            if let Err(e) = self.destroy(site, &handle).await {
                tracing::warn!(backend = %self.name(), sandbox = %handle, "destroying a sandbox made without what was asked: {e}");
            }
            return Err(WharfError::new(
                Code::Forbidden,
                format!(
                    "backend `{}` provisions its sandboxes outside the host's container engine, so the host cannot give {} (never a weaker sandbox than asked)",
                    self.name(),
                    profile.describe()
                ),
            ));
        }
        Ok(handle)
    }

    /// Runs a shell command in a sandbox.
    pub async fn run_command(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        request: CommandRequest,
    ) -> Result<CommandResult, WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_run_command(store, sandbox, &(&request).into()).await
            ))
        })
        .await
    }

    /// Destroys a sandbox (idempotent).
    pub async fn destroy(&self, site: CallSite<'_>, sandbox: &str) -> Result<(), WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_destroy(store, sandbox).await
            ))
        })
        .await
    }

    /// Whether a sandbox still exists and answers.
    pub async fn is_alive(&self, site: CallSite<'_>, sandbox: &str) -> Result<bool, WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_is_alive(store, sandbox).await
            ))
        })
        .await
    }

    /// Native read (feature `read-file`).
    pub async fn read_file(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        path: &str,
        offset: u64,
        max_bytes: u64,
    ) -> Result<FileChunk, WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_read_file(store, sandbox, path, offset, max_bytes)
                    .await
            ))
        })
        .await
    }

    /// Native write (feature `write-file`).
    pub async fn write_file(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        path: &str,
        content: Vec<u8>,
    ) -> Result<(), WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer(
                g.call_write_file(store, sandbox, path, &content).await
            ))
        })
        .await
    }

    /// Native listing (feature `list-dir`).
    pub async fn list_dir(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        path: &str,
    ) -> Result<Vec<DirEntry>, WharfError> {
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ProviderExports(exports), |g| answer_list(
                g.call_list_dir(store, sandbox, path).await
            ))
        })
        .await
    }

    /// Starts a background process in a sandbox (feature `processes`).
    pub async fn start_process(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        start: ProcessStart,
    ) -> Result<ProcessInfo, WharfError> {
        self.on_optional(site, Provider02::processes, refused, async |g, store| {
            answer(g.call_start(store, sandbox, &(&start).into()).await)
        })
        .await
    }

    /// A background process's output from an offset (feature `processes`).
    pub async fn process_output(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        read: OutputRead,
    ) -> Result<OutputChunk, WharfError> {
        self.on_optional(site, Provider02::processes, refused, async |g, store| {
            let OutputRead {
                pid,
                offset,
                max_bytes,
                wait_ms,
            } = read;
            answer(
                g.call_output(store, sandbox, pid, offset, max_bytes, wait_ms)
                    .await,
            )
        })
        .await
    }

    /// Writes to a background process's stdin (feature `processes`).
    pub async fn process_input(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        pid: u32,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), WharfError> {
        self.on_optional(site, Provider02::processes, refused, async |g, store| {
            answer(g.call_write_stdin(store, sandbox, pid, &data, close).await)
        })
        .await
    }

    /// Signals a background process (feature `processes`).
    pub async fn signal_process(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        pid: u32,
        signal: Signal,
    ) -> Result<(), WharfError> {
        self.on_optional(site, Provider02::processes, refused, async |g, store| {
            answer(g.call_send_signal(store, sandbox, pid, signal.into()).await)
        })
        .await
    }

    /// A sandbox's background processes (feature `processes`).
    pub async fn list_processes(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
    ) -> Result<Vec<ProcessInfo>, WharfError> {
        self.on_optional(site, Provider02::processes, refused, async |g, store| {
            answer_list(g.call_list(store, sandbox).await)
        })
        .await
    }

    /// Pauses, resumes or snapshots a sandbox (feature `suspension`; a snapshot's image is
    /// the call's `CallSite::snapshot`).
    pub async fn suspend(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
        op: SuspendOp,
    ) -> Result<(), WharfError> {
        self.on_optional(
            site,
            Provider02::suspension,
            cannot_pause,
            async |g, store| {
                answer(match op {
                    SuspendOp::Pause => g.call_pause(store, sandbox).await,
                    SuspendOp::Resume => g.call_resume(store, sandbox).await,
                    SuspendOp::Snapshot => g.call_snapshot(store, sandbox).await,
                })
            },
        )
        .await
    }
}

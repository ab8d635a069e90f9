//! A sandbox provider as loaded: its pool of instances and the provider contract as
//! typed host calls — `create`, `run-command`, `destroy`, `is-alive`, the native file
//! operations its features declare, background processes (feature `processes`) and
//! pausing (feature `suspension`). The sandbox toolset builds the standard tools and
//! the session hooks on top of this (`sandbox_toolset::ProviderBackend`).

use crate::engines::container_types::{OutputChunk, OutputRead, ProcessInfo, ProcessStart, Signal};
use crate::error_code::{Code, WharfError};
use crate::imports::services::HostServices;
use crate::policy::{EgressAsk, Grants, SandboxProfile};
use crate::runtime::backend::PoolWatch;
use crate::runtime::guest_call::{self, CallSite};
use crate::runtime::guest_types::{
    CommandRequest, CommandResult, DirEntry, FileChunk, ProviderFeatures, SandboxSpec,
};
use crate::runtime::instance_pool::{InstancePool, PoolSettings};
use crate::runtime::provider_guest::ProviderPre;
pub use crate::runtime::provider_processes::SuspendOp;
use crate::runtime::resource_component::config_text;
use anyhow::Result;
use serde_json::Value;
use std::sync::Arc;

/// A running sandbox provider.
pub struct ProviderComponent {
    name: Arc<str>,
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
        let pool = InstancePool::start(
            name.clone(),
            pre,
            settings,
            config_text(config),
            grants,
            services,
        )
        .await?;
        Ok(Self {
            name,
            features,
            pool,
        })
    }

    /// The operator's name for the provider.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it implements natively.
    pub fn features(&self) -> ProviderFeatures {
        self.features
    }

    /// The pool's settings (the hook timeout bounds each provider call by default).
    pub fn settings(&self) -> &PoolSettings {
        self.pool.settings()
    }

    /// Its instance pool, to watch.
    pub fn pool(&self) -> Arc<dyn PoolWatch> {
        self.pool.clone()
    }

    /// Stops taking calls and shuts the instances down.
    pub async fn drain(&self) {
        self.pool.drain().await
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
        let handle = guest_call::run(&self.pool, &self.name, asked, move |i| {
            Box::pin(async move { i.exports.create(&mut i.store, &spec).await })
        })
        .await?;
        if profile.asks_anything() && profile.applied() == 0 {
            if let Err(e) = self.destroy(site, &handle).await {
                tracing::warn!(backend = %self.name, sandbox = %handle, "destroying a sandbox made without what was asked: {e}");
            }
            return Err(WharfError::new(
                Code::Forbidden,
                format!(
                    "backend `{}` provisions its sandboxes outside the host's container engine, so the host cannot give {} (never a weaker sandbox than asked)",
                    self.name,
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .run_command(&mut i.store, &sandbox, &request)
                    .await
            })
        })
        .await
    }

    /// Destroys a sandbox (idempotent).
    pub async fn destroy(&self, site: CallSite<'_>, sandbox: &str) -> Result<(), WharfError> {
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.destroy(&mut i.store, &sandbox).await })
        })
        .await
    }

    /// Whether a sandbox still exists and answers.
    pub async fn is_alive(&self, site: CallSite<'_>, sandbox: &str) -> Result<bool, WharfError> {
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.is_alive(&mut i.store, &sandbox).await })
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
        let (sandbox, path) = (sandbox.to_string(), path.to_string());
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .read_file(&mut i.store, &sandbox, &path, offset, max_bytes)
                    .await
            })
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
        let (sandbox, path) = (sandbox.to_string(), path.to_string());
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .write_file(&mut i.store, &sandbox, &path, &content)
                    .await
            })
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
        let (sandbox, path) = (sandbox.to_string(), path.to_string());
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.list_dir(&mut i.store, &sandbox, &path).await })
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .start_process(&mut i.store, &sandbox, &start)
                    .await
            })
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.process_output(&mut i.store, &sandbox, read).await })
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .process_input(&mut i.store, &sandbox, pid, &data, close)
                    .await
            })
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move {
                i.exports
                    .signal_process(&mut i.store, &sandbox, pid, signal)
                    .await
            })
        })
        .await
    }

    /// A sandbox's background processes (feature `processes`).
    pub async fn list_processes(
        &self,
        site: CallSite<'_>,
        sandbox: &str,
    ) -> Result<Vec<ProcessInfo>, WharfError> {
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.list_processes(&mut i.store, &sandbox).await })
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
        let sandbox = sandbox.to_string();
        guest_call::run(&self.pool, &self.name, site, move |i| {
            Box::pin(async move { i.exports.suspend(&mut i.store, &sandbox, op).await })
        })
        .await
    }
}

//! A sandbox provider presented as an ordinary backend: its tools are the standard
//! toolset, a session's `initialize` provisions a sandbox (`create`, the handle kept in
//! the session data), `discover` asks `is-alive`, `cleanup` calls `destroy`, and the files
//! route reads and writes through it, and `suspend` pauses and resumes the sandbox (feature
//! `suspension`). Nothing else in the host knows it is a provider.
//! With a warm pool, `initialize` first asks the pool for a started sandbox of the
//! session's shape (`warm_pool`), and `cleanup` forgets the pool's row of one it took.

use super::dispatch::{self, sandbox_handle};
use super::file_ops::Sandbox;
use super::session_spec::{self, exposed_ports, sandbox_spec};
use super::tools::tool_descriptions;
use super::warm_pool::{WarmPool, WarmSetup};
use crate::engines::container_types::{SnapshotAsk, SnapshotTarget};
use crate::error_code::WharfError;
use crate::quotas::host_tenant;
use crate::runtime::backend::{
    Backend, PoolWatch, SandboxFiles, SessionStart, ToolCall, no_suspension,
};
use crate::runtime::backend_description::BackendDescription;
use crate::runtime::guest_call::CallSite;
use crate::runtime::guest_types::{Discovery, SessionView};
use crate::runtime::provider_component::{ProviderComponent, SuspendOp};
use crate::tool::ToolResult;
use async_trait::async_trait;
use serde_json::{Value, json};

/// A provider behind the standard toolset.
pub struct ProviderBackend {
    provider: std::sync::Arc<ProviderComponent>,
    warm: Option<WarmPool>,
}

impl ProviderBackend {
    /// Wraps a running provider.
    pub fn new(provider: ProviderComponent) -> Self {
        Self {
            provider: std::sync::Arc::new(provider),
            warm: None,
        }
    }

    /// Wraps a running provider and starts filling its warm pool (when `setup` asks for
    /// one of a size above 0).
    pub fn with_warm_pool(
        provider: ProviderComponent,
        setup: Option<WarmSetup>,
    ) -> Result<Self, WharfError> {
        let mut backend = Self::new(provider);
        if let Some(setup) = setup {
            backend.warm =
                WarmPool::start(backend.provider.name(), backend.provider.clone(), setup)?;
        }
        Ok(backend)
    }

    /// Its warm pool, if it has one.
    pub fn warm_pool(&self) -> Option<&WarmPool> {
        self.warm.as_ref()
    }

    /// Adds what the toolset declares to a provider's description: the six tools (and the
    /// process tools and `preview_url` when the provider runs background processes,
    /// `snapshot_sandbox` when it can snapshot) and the sandbox config schema.
    pub fn describe(description: &mut BackendDescription) {
        let features = description.features;
        let tools = &mut description.tools;
        *tools = tool_descriptions();
        if features.processes {
            tools.extend(super::process_tools::tool_descriptions());
            tools.push(super::preview_tool::tool_description());
        }
        if features.suspension {
            tools.push(super::snapshot_tool::tool_description());
            tools.push(super::pause_tool::tool_description());
        }
        description.session_config_schema = Some(session_spec::schema());
    }

    fn sandbox<'a>(&'a self, session: &'a SessionView) -> Result<Sandbox<'a>, WharfError> {
        // The files route runs as the host's own work, as releases do.
        Ok(Sandbox {
            provider: &self.provider,
            tenant: host_tenant(),
            session_id: &session.id,
            handle: sandbox_handle(session)?,
            timeout: self.provider.settings().hook_timeout,
        })
    }
}

#[async_trait]
impl Backend for ProviderBackend {
    async fn call(&self, call: ToolCall) -> Result<ToolResult, WharfError> {
        let Some(session) = &call.session else {
            return Err(WharfError::session_not_found(format!(
                "`{}:{}` runs in a sandbox: create a session first",
                self.provider.name(),
                call.action
            )));
        };
        if call.action == super::preview_tool::PREVIEW_URL {
            return super::preview_tool::call(session, call.args, call.host.as_ref()).await;
        }
        if call.action == super::snapshot_tool::SNAPSHOT_SANDBOX {
            return super::snapshot_tool::call(session, call.args, call.host.as_ref()).await;
        }
        if call.action == super::pause_tool::PAUSE_SANDBOX {
            return super::pause_tool::call(
                self.provider.name(),
                session,
                call.args,
                call.host.as_ref(),
            )
            .await;
        }
        dispatch::call(
            &self.provider,
            &call.tenant,
            session,
            &call.action,
            call.args,
            call.timeout,
            call.output.as_ref(),
        )
        .await
    }

    async fn initialize(&self, start: SessionStart) -> Result<Value, WharfError> {
        let mut spec = sandbox_spec(&start.config, start.owner, start.max_lifetime_seconds)?;
        if let Some(image) = &start.sandbox.from_image {
            spec.image = Some(image.clone());
        }
        // Host-owned, like the handle: the preview listener reads what a session exposes.
        let ports = exposed_ports(&start.config)?;
        if start.warm
            && let Some(pool) = &self.warm
            && let Some(taken) = pool.take(&spec, &start.id).await
        {
            return Ok(json!({ "sandbox": taken.handle, "warm": taken.id, "expose_ports": ports }));
        }
        let handle = self
            .provider
            .create(
                self.provider.hook_site(&start.tenant, &start.id),
                spec,
                start.sandbox.clone(),
            )
            .await?;
        Ok(json!({ "sandbox": handle, "expose_ports": ports }))
    }

    async fn cleanup(&self, session: &SessionView) -> Result<(), WharfError> {
        match sandbox_handle(session) {
            Ok(handle) => {
                self.provider
                    .destroy(self.provider.hook_site(host_tenant(), &session.id), handle)
                    .await?;
                if let (Some(pool), Some(warm)) = (&self.warm, session.data["warm"].as_str()) {
                    pool.forget(warm).await?;
                }
                Ok(())
            }
            // It never got a sandbox: nothing to release.
            Err(_) => Ok(()),
        }
    }

    async fn discover(&self, session: &SessionView) -> Result<Discovery, WharfError> {
        let Ok(handle) = sandbox_handle(session) else {
            return Ok(Discovery::Gone);
        };
        Ok(
            if self
                .provider
                .is_alive(self.provider.hook_site(host_tenant(), &session.id), handle)
                .await?
            {
                Discovery::Alive
            } else {
                Discovery::Gone
            },
        )
    }

    async fn drain(&self) {
        if let Some(pool) = &self.warm {
            pool.drain().await;
        }
        self.provider.drain().await
    }

    fn pool(&self) -> std::sync::Arc<dyn PoolWatch> {
        self.provider.pool()
    }

    fn files(&self) -> Option<&dyn SandboxFiles> {
        Some(self)
    }

    fn suspendable(&self) -> bool {
        self.provider.features().suspension
    }

    fn warm_sandboxes(&self) -> Option<(usize, usize)> {
        self.warm.as_ref().map(|w| (w.idle(), w.kept()))
    }

    async fn suspend(&self, session: &SessionView, resume: bool) -> Result<(), WharfError> {
        if !self.suspendable() {
            return Err(no_suspension(Some(self.provider.name())));
        }
        let handle = sandbox_handle(session)?;
        let op = if resume {
            SuspendOp::Resume
        } else {
            SuspendOp::Pause
        };
        self.provider
            .suspend(
                self.provider.hook_site(host_tenant(), &session.id),
                handle,
                op,
            )
            .await
    }

    async fn snapshot(
        &self,
        session: &SessionView,
        target: SnapshotTarget,
    ) -> Result<u64, WharfError> {
        if !self.suspendable() {
            return Err(no_suspension(Some(self.provider.name())));
        }
        let handle = sandbox_handle(session)?;
        let ask = std::sync::Arc::new(SnapshotAsk::new(target));
        // A large tree takes a while to commit: the call gets the pool's longest wait.
        let timeout = self.provider.settings().hook_timeout.max(SNAPSHOT_TIMEOUT);
        self.provider
            .suspend(
                CallSite {
                    snapshot: Some(&ask),
                    ..CallSite::in_session(host_tenant(), &session.id, timeout)
                },
                handle,
                SuspendOp::Snapshot,
            )
            .await?;
        ask.outcome().ok_or_else(|| {
            WharfError::new(
                crate::error_code::Code::ExecutionError,
                format!(
                    "backend `{}` answered its snapshot without committing its sandbox",
                    self.provider.name()
                ),
            )
        })
    }
}

/// The longest a snapshot's commit may take.
const SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

#[async_trait]
impl SandboxFiles for ProviderBackend {
    async fn size(&self, session: &SessionView, path: &str) -> Result<u64, WharfError> {
        self.sandbox(session)?.size(path).await
    }

    async fn slice(
        &self,
        session: &SessionView,
        path: &str,
        index: u64,
    ) -> Result<Vec<u8>, WharfError> {
        self.sandbox(session)?.slice(path, index).await
    }

    async fn write(
        &self,
        session: &SessionView,
        path: &str,
        content: Vec<u8>,
    ) -> Result<(), WharfError> {
        self.sandbox(session)?.write(path, content).await
    }

    async fn append(
        &self,
        session: &SessionView,
        path: &str,
        content: Vec<u8>,
    ) -> Result<(), WharfError> {
        self.sandbox(session)?.append(path, content).await
    }
}

//! `container`: containers on the host's container engine (`engines::ContainerEngine`:
//! Docker, or the disabled engine's 5012), checked against the backend's grants, labelled
//! by the host from the call context, visible only to their backend.

mod v0_1_adapter;
mod volume_mounts;

use super::container_turns::CreateTurns;
use super::host_mounts::{self, ResolvedMount};
use super::services::HostServices;
use super::{HasView, HostImportsView, ImportContext, ImportContexts, View, guest_error};
use crate::engines::{self as engine, ContainerEngine, EngineError, Owner};
use crate::error_code::Code;
use crate::policy::{
    ContainerRequest, Grants, MountAsk, MountGrant, NetworkRequest, SandboxProfile,
};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::container::{
    ContainerInfo, ContainerSpec, ContainerState, Host, Network,
};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::{v0_1, v0_2};
use std::sync::Arc;
use wasmtime::component::Linker;

/// The `container` (and `exec`) import's state in one instance: the backend's grants and
/// what of the process's services containers take — the engine, the create turns, the
/// tenants' quotas (and where their refusals are counted), the buffer cap — and nothing
/// else of them.
#[derive(Debug, Clone)]
pub struct ContainerCtx {
    grants: Arc<Grants>,
    pub(super) engine: Arc<dyn ContainerEngine>,
    pub(super) create_turns: Arc<CreateTurns>,
    pub(super) quotas: Arc<crate::quotas::Quotas>,
    pub(super) metrics: Arc<crate::metrics::Metrics>,
    pub(super) guest_buffer_cap: crate::bounded::GuestBufferCap,
}

impl ContainerCtx {
    /// The context of a backend with `grants`, on the process's `services`.
    pub fn new(grants: Arc<Grants>, services: &HostServices) -> Self {
        Self {
            grants,
            engine: services.containers.clone(),
            create_turns: services.create_turns.clone(),
            quotas: services.quotas.clone(),
            metrics: services.metrics.clone(),
            guest_buffer_cap: services.guest_buffer_cap,
        }
    }
}

/// What one call of `container` (or of an import that shares its view) sees: the context,
/// the call (its session and deadline) and the counter.
pub type ContainerView<'a> = View<'a, ContainerCtx>;

/// The `HasData` of `container` and of the imports that share its view.
pub(super) type HasContainer = HasView<ContainerCtx>;

impl ImportContext for ContainerCtx {
    fn of(contexts: &ImportContexts) -> &Self {
        &contexts.container
    }
}

/// Links `container` for components of every served contract version (0.1.0 through `v0_1`).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    v0_2::backend::wharf::plugin0_2_0::container::add_to_linker::<T, HasContainer>(
        linker,
        HasContainer::view,
    )?;
    v0_1::backend::wharf::plugin0_1_0::container::add_to_linker::<T, HasContainer>(
        linker,
        HasContainer::view,
    )?;
    Ok(())
}

type Answer<T> = wasmtime::Result<Result<T, Error>>;

/// Where a sandbox writes when its root is read-only (copy-in needs a volume there).
const DEFAULT_WORK_VOLUME: &str = "/work";

/// An engine failure as the guest sees it.
pub fn engine_error(err: EngineError) -> Error {
    let code = Code::from_u32(err.code()).unwrap_or(Code::ExecutionError);
    let mut e = guest_error(code, err.to_string());
    e.retryable = err.retryable();
    e
}

fn info_to_wit(info: engine::ContainerInfo) -> ContainerInfo {
    ContainerInfo {
        id: info.id,
        name: info.name,
        image: info.image,
        state: match info.state {
            engine::ContainerState::Created => ContainerState::Created,
            engine::ContainerState::Running => ContainerState::Running,
            engine::ContainerState::Paused => ContainerState::Paused,
            engine::ContainerState::Exited => ContainerState::Exited,
            engine::ContainerState::Dead => ContainerState::Dead,
            engine::ContainerState::Unknown => ContainerState::Unknown,
        },
        labels: info.labels,
        created_at_ms: info.created_at_ms,
    }
}

impl ContainerView<'_> {
    /// Who is calling, for the engine's ownership checks.
    pub fn owner(&self) -> Owner {
        Owner {
            backend: self.counter.backend().to_string(),
            session: self.call.session_id.clone(),
        }
    }

    /// Resolves the mounts, then counts and creates within the backend's turn (see
    /// [`container_turns`](super::container_turns)), applying `profile` (what a session
    /// asked of its sandbox, or what `sandboxing.create` asked) to the container.
    pub(super) async fn create_checked(
        &mut self,
        spec: ContainerSpec,
        profile: Option<Arc<SandboxProfile>>,
    ) -> Result<ContainerInfo, Error> {
        let (engine, turns) = (self.ctx.engine.clone(), self.ctx.create_turns.clone());
        engine.configured().map_err(engine_error)?;
        let (mounts, resolved_grants) = self.resolve_mounts(&spec).await?;
        let backend = self.counter.backend().to_string();
        let turn = super::container_turns::take(&turns, &backend).await?;
        let created = self
            .count_and_create(&*engine, spec, mounts, &resolved_grants, profile)
            .await;
        turn.end().await;
        created
    }

    /// The requested mounts with their host paths resolved, and the resolved grants; or
    /// the denial.
    async fn resolve_mounts(
        &mut self,
        spec: &ContainerSpec,
    ) -> Result<(Vec<ResolvedMount>, Vec<MountGrant>), Error> {
        if spec.mounts.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let forbidden = |d: crate::policy::Denial| guest_error(Code::Forbidden, d.0);
        let grants = host_mounts::resolve_grants(&self.ctx.grants)
            .await
            .map_err(forbidden)?;
        let mut out = Vec::with_capacity(spec.mounts.len());
        for m in &spec.mounts {
            out.push(ResolvedMount {
                requested: m.host_path.clone(),
                host_path: host_mounts::resolve_path(&m.host_path, &self.ctx.grants, &grants)
                    .await
                    .map_err(forbidden)?,
                container_path: m.container_path.clone(),
                read_only: m.read_only,
            });
        }
        Ok((out, grants))
    }

    async fn count_and_create(
        &mut self,
        engine: &dyn ContainerEngine,
        spec: ContainerSpec,
        mounts: Vec<ResolvedMount>,
        resolved_grants: &[MountGrant],
        profile: Option<Arc<SandboxProfile>>,
    ) -> Result<ContainerInfo, Error> {
        let owner = self.owner();
        let network = match &spec.network {
            Network::None => NetworkRequest::None,
            Network::Bridge => NetworkRequest::Bridge,
            Network::Named(n) => NetworkRequest::Named(n.clone()),
        };
        self.check_container_quota(engine).await?;
        let owned = engine
            .list_owned(&owner.backend, None)
            .await
            .map_err(engine_error)?;
        let in_session = match &owner.session {
            Some(s) => owned
                .iter()
                .filter(|c| c.session.as_deref() == Some(s.as_str()))
                .count(),
            None => 0,
        };
        // A sandbox from a snapshot is made of that image, never of another one.
        if let Some(granted) = profile.as_ref().and_then(|p| p.granted_image.as_ref())
            && *granted != spec.image
        {
            return Err(guest_error(
                Code::Forbidden,
                format!(
                    "this sandbox starts from snapshot image `{granted}`, not `{}`",
                    spec.image
                ),
            ));
        }
        let image_granted = profile
            .as_ref()
            .is_some_and(|p| p.grants_image(&spec.image));
        let request = ContainerRequest {
            image: &spec.image,
            image_granted,
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            pids_limit: spec.pids_limit,
            host_mounts: mounts
                .iter()
                .map(|m| MountAsk {
                    requested: &m.requested,
                    host_path: std::path::Path::new(&m.host_path),
                    read_only: m.read_only,
                })
                .collect(),
            resolved_grants: Some(resolved_grants),
            network: &network,
            backend_containers: u32::try_from(owned.len()).unwrap_or(u32::MAX),
            session_containers: u32::try_from(in_session).unwrap_or(u32::MAX),
        };
        let limits = self
            .ctx
            .grants
            .check_container(&request)
            .map_err(|d| guest_error(Code::Forbidden, d.0))?;
        let isolation = self
            .ctx
            .grants
            .isolation_for(profile.as_ref().and_then(|p| p.isolation))
            .map_err(|d| guest_error(Code::Forbidden, d.0))?;
        // An egress allowlist: the container gets no network but the host's proxy.
        let egress = profile
            .as_ref()
            .and_then(|p| p.egress.as_ref())
            .map(|ask| self.ctx.grants.egress_rule(ask))
            .transpose()
            .map_err(|d| guest_error(Code::Forbidden, d.0))?;
        let volumes = self.checked_volumes(engine, profile.as_deref()).await?;
        let work_volume = spec
            .workdir
            .clone()
            .unwrap_or_else(|| DEFAULT_WORK_VOLUME.to_string());
        let engine_spec = engine::ContainerSpec {
            image: spec.image,
            command: spec.command,
            env: spec.env,
            workdir: Some(work_volume.clone()),
            labels: spec.labels,
            // The resolved path is what was checked, so it is what gets mounted.
            mounts: mounts
                .into_iter()
                .map(|m| engine::Mount {
                    host_path: m.host_path,
                    container_path: m.container_path,
                    read_only: m.read_only,
                })
                .collect(),
            volumes,
            network: match network {
                NetworkRequest::None => engine::Network::None,
                NetworkRequest::Bridge => engine::Network::Bridge,
                NetworkRequest::Named(n) => engine::Network::Named(n),
            },
            cpu_millis: Some(limits.cpu_millis),
            memory_bytes: Some(limits.memory_bytes),
            pids_limit: Some(limits.pids_limit),
            read_only_root: spec.read_only_root
                || profile.as_ref().is_some_and(|p| p.read_only_root),
            work_volume: Some(work_volume),
            isolation,
            user: profile.as_ref().and_then(|p| p.user.clone()),
            egress,
        };
        let info = engine
            .create(&owner, &engine_spec)
            .await
            .map_err(engine_error)?;
        if let Some(profile) = &profile {
            profile.mark_applied();
        }
        tracing::info!(target: "wharf::audit", event = "container_create", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %info.id, image = %info.image, isolation = %isolation, egress_by_name = engine_spec.egress.is_some());
        Ok(info_to_wit(info))
    }
}

/// The engine as `engine_op` hands it to an operation. A named type rather than
/// `Arc<dyn ContainerEngine>`: rustc cannot prove an async closure's future `Send` when
/// its argument carries a trait object's lifetime.
pub(super) struct Engine(Arc<dyn ContainerEngine>);

impl std::ops::Deref for Engine {
    type Target = dyn ContainerEngine;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl ContainerView<'_> {
    /// The one wrapper of a `container` (and `exec`) call: the engine (the disabled one's 5012 before
    /// anything else), the caller as owner, the engine's error as the guest sees it, and
    /// the call counted under `import`.
    pub(super) async fn engine_op<T>(
        &mut self,
        import: &'static str,
        op: impl AsyncFnOnce(Engine, Owner) -> Result<T, EngineError>,
    ) -> Answer<T> {
        let engine = Engine(self.ctx.engine.clone());
        let answer = match engine.configured() {
            Ok(()) => op(engine, self.owner()).await,
            Err(e) => Err(e),
        };
        self.counter.counted(import, answer.map_err(engine_error))
    }
}

impl Host for ContainerView<'_> {
    async fn create(&mut self, spec: ContainerSpec) -> Answer<ContainerInfo> {
        // What the session asked of its sandbox, if this call provisions one.
        let profile = self.call.sandbox.clone();
        let answer = self.create_checked(spec, profile).await;
        self.counter.counted("container.create", answer)
    }

    async fn start(&mut self, id: String) -> Answer<()> {
        self.engine_op("container.start", async |engine, owner| {
            engine.start(&owner, &id).await
        })
        .await
    }

    async fn stop(&mut self, id: String, timeout_ms: u32) -> Answer<()> {
        self.engine_op("container.stop", async |engine, owner| {
            engine.stop(&owner, &id, timeout_ms).await
        })
        .await
    }

    async fn remove(&mut self, id: String) -> Answer<()> {
        self.engine_op("container.remove", async |engine, owner| {
            engine.remove(&owner, &id).await?;
            tracing::info!(target: "wharf::audit", event = "container_remove", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %id);
            Ok(())
        })
        .await
    }

    async fn inspect(&mut self, id: String) -> Answer<Option<ContainerInfo>> {
        self.engine_op("container.inspect", async |engine, owner| {
            Ok(engine.inspect(&owner, &id).await?.map(info_to_wit))
        })
        .await
    }

    async fn list_owned(&mut self, session_id: Option<String>) -> Answer<Vec<ContainerInfo>> {
        self.engine_op("container.list-owned", async |engine, owner| {
            let listed = engine
                .list_owned(&owner.backend, session_id.as_deref())
                .await?;
            Ok(listed.into_iter().map(info_to_wit).collect())
        })
        .await
    }

    async fn copy_in(
        &mut self,
        id: String,
        path: String,
        content: Vec<u8>,
        mode: u32,
    ) -> Answer<()> {
        self.engine_op("container.copy-in", async |engine, owner| {
            engine.copy_in(&owner, &id, &path, &content, mode).await
        })
        .await
    }

    async fn copy_out(&mut self, id: String, path: String, max_bytes: u64) -> Answer<Vec<u8>> {
        // Read whole into host memory before the guest sees it: the host's cap, not the guest's.
        let max_bytes = self.ctx.guest_buffer_cap.clamp(max_bytes);
        self.engine_op("container.copy-out", async |engine, owner| {
            engine.copy_out(&owner, &id, &path, max_bytes).await
        })
        .await
    }
}

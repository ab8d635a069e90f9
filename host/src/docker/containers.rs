//! Container lifecycle: create, start, stop, remove, inspect, list — each scoped to the
//! calling backend.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::ContainerSummary;
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, StopContainerOptions,
};

use super::archive::build_archive;
use super::client::{Docker, OP_TIMEOUT};
use super::container_body::{container_name, create_body};
use super::egress_registry::rule_of;
use super::error::DockerError;
use super::info::{from_inspect, from_summary};
use super::labels::{
    LABEL_BACKEND, LABEL_EGRESS, LABEL_NODE, build_labels, check_id, engine_filter, is_full_id,
    is_owners, owner_filters, shorten,
};
use super::runtimes::{EngineRuntime, EngineRuntimes, gvisor_host_pids, shares_host_sockets};
use super::sandbox_agent::{ImageDefaults, SocketHome};
use super::types::{ContainerInfo, ContainerSpec, Owner};
use crate::policy::Isolation;
use wharf_sandbox_protocol::BINARY_PATH;

impl Docker {
    /// Creates (does not start) a container for `owner`, labelled with the host's labels.
    /// The image must be present locally.
    pub async fn create(
        &self,
        owner: &Owner,
        spec: &ContainerSpec,
    ) -> Result<ContainerInfo, DockerError> {
        let labels = build_labels(owner, self.node_id(), &spec.labels)?;
        let mut body = create_body(spec, labels)?;
        let runtime = self.runtime_for(spec.isolation).await?;
        if let Some(host_config) = body.host_config.as_mut() {
            host_config.runtime = runtime.as_ref().map(|r| r.name.clone());
            if runtime.is_some() && spec.isolation == Isolation::Gvisor {
                host_config.pids_limit = host_config.pids_limit.map(gvisor_host_pids);
            }
        }
        let api = self.api().await?;
        let name = container_name(&owner.backend);
        let read_only_root = body
            .host_config
            .as_ref()
            .and_then(|h| h.readonly_rootfs)
            .unwrap_or(false);
        // A copied agent needs a writable root to be copied to (the engine refuses an
        // upload into a read-only one): such a sandbox runs without the agent, commands
        // through the engine's exec.
        let placement = self
            .agent_placement()
            .filter(|placement| !(placement.is_copied() && read_only_root));
        if spec.egress.is_some() && !self.is_local() {
            return Err(DockerError::Refused(
                "an egress allowlist needs a local docker engine: this host cannot enforce one on a remote engine".into(),
            ));
        }
        if let Some(placement) = placement {
            let image = self
                .run(
                    "inspect image",
                    OP_TIMEOUT,
                    api.inspect_image(spec.image.trim()),
                )
                .await?;
            let config = image.config.unwrap_or_default();
            let defaults = ImageDefaults {
                entrypoint: config.entrypoint.unwrap_or_default(),
                cmd: config.cmd,
                user: config.user,
            };
            // gVisor's files are its own kernel's: the agent's socket must be a host socket,
            // or else reached through the engine.
            let home = match &runtime {
                _ if placement.is_copied() => SocketHome::ThroughEngine,
                Some(runtime) if spec.isolation == Isolation::Gvisor => {
                    if runtime.host_sockets {
                        SocketHome::OnHost
                    } else {
                        SocketHome::ThroughEngine
                    }
                }
                _ => SocketHome::InContainer,
            };
            placement.place(&mut body, defaults, home, spec.egress.is_some());
        } else if spec.egress.is_some() {
            return Err(DockerError::Refused(
                "an egress allowlist needs the sandbox agent (server.sandbox_agent, a local engine): this host cannot enforce one".into(),
            ));
        }
        if let Some(rule) = &spec.egress {
            let rule = serde_json::to_string(rule)
                .map_err(|e| DockerError::Invalid(format!("egress rule: {e}")))?;
            body.labels
                .get_or_insert_with(Default::default)
                .insert(LABEL_EGRESS.to_string(), rule);
        }
        let options = CreateContainerOptions {
            name: Some(name),
            ..Default::default()
        };
        let created = self
            .run(
                "create container",
                OP_TIMEOUT,
                api.create_container(Some(options), body),
            )
            .await?;
        if let Some(placement) = placement.filter(|p| p.is_copied())
            && let Err(e) = self.copy_agent_in(&api, &created.id, placement).await
        {
            // A container without the agent it is labelled with would answer nobody.
            let _ = self.force_remove(&api, &created.id).await;
            return Err(e);
        }
        let found = self
            .run(
                "inspect container",
                OP_TIMEOUT,
                api.inspect_container(&created.id, None),
            )
            .await?;
        Ok(from_inspect(&found))
    }

    /// Starts an owned container; starting a running one is not an error.
    pub async fn start(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        let found = self.require_owned(owner, id).await?;
        let api = self.api().await?;
        self.run("start container", OP_TIMEOUT, api.start_container(id, None))
            .await?;
        // A started sandbox is one its agent answers in: the first command must not race
        // the agent's bind (it would take the engine's exec, or find no processes).
        self.await_agent(owner, id).await;
        // A sandbox from a snapshot gets its work dir's files back before anyone uses it.
        let labels = found.config.as_ref().and_then(|c| c.labels.as_ref());
        self.restore_work(owner, id, labels).await?;
        if let Some(rule) = rule_of(&found) {
            self.link_egress(owner, id, rule).await;
        }
        Ok(())
    }

    /// Stops an owned container: SIGTERM, then SIGKILL after `timeout_ms` (rounded up to
    /// whole seconds, Docker's unit). Stopping a stopped container is not an error.
    pub async fn stop(&self, owner: &Owner, id: &str, timeout_ms: u32) -> Result<(), DockerError> {
        self.require_owned(owner, id).await?;
        self.shells().forget(id);
        let secs = timeout_ms.div_ceil(1000);
        let t = i32::try_from(secs).unwrap_or(i32::MAX);
        let api = self.api().await?;
        let options = StopContainerOptions {
            t: Some(t),
            signal: None,
        };
        let limit = OP_TIMEOUT + Duration::from_secs(u64::from(secs));
        self.run(
            "stop container",
            limit,
            api.stop_container(id, Some(options)),
        )
        .await
    }

    /// Force-removes an owned container with its anonymous volumes. Idempotent: a
    /// container that is already gone is `Ok`. Another backend's container is `NotFound`.
    pub async fn remove(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        super::labels::check_owner(owner)?;
        check_id(id)?;
        let api = self.api().await?;
        let Some(found) = self
            .run_found(
                "inspect container",
                OP_TIMEOUT,
                api.inspect_container(id, None),
            )
            .await?
        else {
            return Ok(());
        };
        if !is_owners(&found, owner, id) {
            return Err(DockerError::NotFound(format!("container {}", shorten(id))));
        }
        self.shells().forget(id);
        self.known_agents().forget(id);
        self.engine_links().forget(id);
        self.unlink_egress(id);
        match self.force_remove(&api, id).await {
            Ok(()) | Err(DockerError::NotFound(_)) => {}
            // "removal of container ... is already in progress"
            Err(DockerError::Failed(m)) if m.contains("already in progress") => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The container if `owner`'s backend owns it; `None` if it is missing, is another
    /// backend's, or `id` is not a full id.
    pub async fn inspect(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<ContainerInfo>, DockerError> {
        Ok(self
            .inspect_owned(owner, id)
            .await?
            .map(|c| from_inspect(&c)))
    }

    /// The containers of `backend` (of one of its sessions if `session` is set), oldest
    /// first, stopped ones included.
    pub async fn list_owned(
        &self,
        backend: &str,
        session: Option<&str>,
    ) -> Result<Vec<ContainerInfo>, DockerError> {
        if backend.is_empty() {
            return Err(DockerError::Invalid("backend must not be empty".into()));
        }
        let mut out = self.list_filtered(owner_filters(backend, session)).await?;
        out.retain(|c| {
            c.backend == backend && (session.is_none() || c.session.as_deref() == session)
        });
        Ok(out)
    }

    /// Removes the containers `backend` made on this node outside any session, once it is
    /// unloaded; their ids. A container that went meanwhile is not an error.
    pub async fn remove_unloaded(&self, backend: &str) -> Result<Vec<String>, DockerError> {
        let node = self.node_id().to_string();
        let mut removed = Vec::new();
        for c in self.list_owned(backend, None).await? {
            if c.session.is_some() || c.label(LABEL_NODE) != Some(node.as_str()) {
                continue;
            }
            let owner = Owner::backend(backend);
            self.remove(&owner, &c.id).await?;
            removed.push(c.id);
        }
        Ok(removed)
    }

    /// Every container carrying a `wharf.backend` label, whatever its node or backend
    /// (for the orphan reaper), oldest first.
    pub async fn list_all_wharf(&self) -> Result<Vec<ContainerInfo>, DockerError> {
        self.list_filtered(engine_filter("label", vec![LABEL_BACKEND.to_string()]))
            .await
    }

    /// The wharf containers `filters` select (the engine's list filters), oldest first.
    pub(crate) async fn list_filtered(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<ContainerInfo>, DockerError> {
        let mut out: Vec<ContainerInfo> = self
            .list_summaries(filters)
            .await?
            .iter()
            .map(from_summary)
            .filter(|c| is_full_id(&c.id) && !c.backend.is_empty())
            .collect();
        out.sort_by(|a, b| {
            a.created_at_ms
                .cmp(&b.created_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// The engine's own list of the containers (running or not) `filters` select.
    pub(crate) async fn list_summaries(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<ContainerSummary>, DockerError> {
        let api = self.api().await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        self.run(
            "list containers",
            OP_TIMEOUT,
            api.list_containers(Some(options)),
        )
        .await
    }
}

impl Docker {
    /// Removes a container, running or not, with its anonymous volumes.
    async fn force_remove(&self, api: &bollard::Docker, id: &str) -> Result<(), DockerError> {
        let options = RemoveContainerOptions {
            v: true,
            force: true,
            link: false,
        };
        self.run(
            "remove container",
            OP_TIMEOUT,
            api.remove_container(id, Some(options)),
        )
        .await
    }

    /// Copies the agent's binary into a created container (an engine on another machine).
    async fn copy_agent_in(
        &self,
        api: &bollard::Docker,
        id: &str,
        placement: &super::sandbox_agent::AgentPlacement,
    ) -> Result<(), DockerError> {
        // Root's, mode 0755, at BINARY_PATH (uploaded at `/`).
        let file = BINARY_PATH.trim_start_matches('/');
        let dirs: Vec<String> = file
            .rsplit_once('/')
            .map(|(dir, _)| vec![dir.to_string()])
            .unwrap_or_default();
        let archive = build_archive(&dirs, file, placement.bytes(), 0o755)?;
        let options = bollard::query_parameters::UploadToContainerOptions {
            path: "/".to_string(),
            ..Default::default()
        };
        self.run(
            "copy the sandbox agent in",
            OP_TIMEOUT,
            api.upload_to_container(
                id,
                Some(options),
                bollard::body_full(bytes::Bytes::from(archive)),
            ),
        )
        .await
    }

    /// The engine runtime a container at `level` runs under (`None`: the engine's
    /// default), or the refusal naming what is missing.
    pub(crate) async fn runtime_for(
        &self,
        level: Isolation,
    ) -> Result<Option<EngineRuntime>, DockerError> {
        let Some(runtime) = self.runtimes().mapped(level)? else {
            return Ok(None);
        };
        let has = match self.runtimes().fresh() {
            Some(known) if known.contains_key(runtime) => known,
            _ => {
                let api = self.api().await?;
                let info = self.run("engine info", OP_TIMEOUT, api.info()).await?;
                let known: EngineRuntimes = info
                    .runtimes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, runtime)| (name, runtime.runtime_args.unwrap_or_default()))
                    .collect();
                self.runtimes().remember(known.clone());
                known
            }
        };
        match has.get(runtime) {
            Some(args) => Ok(Some(EngineRuntime {
                name: runtime.to_string(),
                host_sockets: shares_host_sockets(args),
            })),
            None => Err(DockerError::Refused(format!(
                "isolation `{level}` needs the engine runtime `{runtime}`, which the docker engine does not have (it has {:?})",
                has.keys().collect::<Vec<_>>()
            ))),
        }
    }
}

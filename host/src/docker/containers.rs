//! Container lifecycle: create, start, stop, remove, inspect, list — each scoped to the
//! calling backend.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, Mount as DockerMount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, StopContainerOptions,
};

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::info::{from_inspect, from_summary};
use super::labels::{LABEL_BACKEND, build_labels, check_id, is_full_id, owner_filters, shorten};
use super::types::{ContainerInfo, ContainerSpec, Network, Owner};

/// Docker's `NetworkMode` for a spec's network; `host` and `container:*` are refused
/// whatever the grants say (they share the host's or another container's namespace).
pub(crate) fn network_mode(network: &Network) -> Result<String, DockerError> {
    match network {
        Network::None => Ok("none".to_string()),
        Network::Bridge => Ok("bridge".to_string()),
        Network::Named(name) => {
            let name = name.trim();
            let lower = name.to_ascii_lowercase();
            if lower == "host" || lower.starts_with("container:") {
                Err(DockerError::Refused(format!(
                    "network {name:?} is never allowed"
                )))
            } else if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                Err(DockerError::Invalid(format!("bad network name {name:?}")))
            } else {
                Ok(name.to_string())
            }
        }
    }
}

fn check_abs_path(what: &str, path: &str) -> Result<(), DockerError> {
    if !path.starts_with('/') || path.contains('\0') || path.chars().any(char::is_control) {
        return Err(DockerError::Invalid(format!(
            "{what} must be an absolute path, got {:?}",
            shorten(path)
        )));
    }
    Ok(())
}

/// `KEY=value` strings, with the keys checked.
pub(crate) fn env_strings(env: &[(String, String)]) -> Result<Vec<String>, DockerError> {
    env.iter()
        .map(|(k, v)| {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                Err(DockerError::Invalid(format!(
                    "bad environment variable name {:?}",
                    shorten(k)
                )))
            } else {
                Ok(format!("{k}={v}"))
            }
        })
        .collect()
}

/// A readable container name: `wharf-<backend>-<12 hex>`.
fn container_name(backend: &str) -> String {
    let mut clean: String = backend
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    if clean.is_empty() {
        clean.push('x');
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("wharf-{clean}-{}", &suffix[..12])
}

fn create_body(
    spec: &ContainerSpec,
    labels: HashMap<String, String>,
) -> Result<ContainerCreateBody, DockerError> {
    let image = spec.image.trim();
    if image.is_empty() || image.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(DockerError::Invalid(format!(
            "bad image reference {:?}",
            shorten(&spec.image)
        )));
    }
    if let Some(cmd) = &spec.command {
        if cmd.is_empty() || cmd[0].is_empty() {
            return Err(DockerError::Invalid("command must not be empty".into()));
        }
        if cmd.iter().any(|a| a.contains('\0')) {
            return Err(DockerError::Invalid("command contains a NUL byte".into()));
        }
    }
    if let Some(dir) = &spec.workdir {
        check_abs_path("workdir", dir)?;
    }
    let mut mounts = Vec::with_capacity(spec.mounts.len());
    for m in &spec.mounts {
        check_abs_path("mount host path", &m.host_path)?;
        check_abs_path("mount container path", &m.container_path)?;
        mounts.push(DockerMount {
            target: Some(m.container_path.clone()),
            source: Some(m.host_path.clone()),
            typ: Some(MountType::BIND),
            read_only: Some(m.read_only),
            ..Default::default()
        });
    }
    if let Some(vol) = &spec.work_volume {
        check_abs_path("work volume", vol)?;
        if vol.trim_end_matches('/').is_empty() {
            return Err(DockerError::Invalid("work volume cannot be /".into()));
        }
    }
    let memory = spec
        .memory_bytes
        .map(|m| {
            i64::try_from(m).map_err(|_| DockerError::Invalid("memory limit too large".into()))
        })
        .transpose()?;
    let host_config = HostConfig {
        network_mode: Some(network_mode(&spec.network)?),
        mounts: if mounts.is_empty() {
            None
        } else {
            Some(mounts)
        },
        nano_cpus: spec.cpu_millis.map(|m| i64::from(m) * 1_000_000),
        memory,
        // Same as memory: no swap on top of the limit.
        memory_swap: memory,
        pids_limit: spec.pids_limit.map(i64::from),
        readonly_rootfs: Some(spec.read_only_root),
        // A real init as PID 1 reaps the processes orphaned when an exec's group is killed;
        // otherwise they linger as zombies and count against the pids limit.
        init: Some(true),
        ..Default::default()
    };
    Ok(ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: spec.command.clone(),
        env: if spec.env.is_empty() {
            None
        } else {
            Some(env_strings(&spec.env)?)
        },
        working_dir: spec.workdir.clone(),
        labels: Some(labels),
        // An anonymous volume declared like `VOLUME`: `remove` (v=true) deletes it.
        volumes: spec.work_volume.clone().map(|v| vec![v]),
        host_config: Some(host_config),
        ..Default::default()
    })
}

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
        let api = self.api().await?;
        let name = container_name(&owner.backend);
        if let Some(placement) = self.agent_placement() {
            let image = self
                .run(
                    "inspect image",
                    OP_TIMEOUT,
                    api.inspect_image(spec.image.trim()),
                )
                .await?;
            let config = image.config.unwrap_or_default();
            placement.place(&mut body, config.entrypoint.unwrap_or_default(), config.cmd);
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
        self.require_owned(owner, id).await?;
        let api = self.api().await?;
        self.run("start container", OP_TIMEOUT, api.start_container(id, None))
            .await?;
        // A started sandbox is one its agent answers in: the first command must not race
        // the agent's bind (it would take the engine's exec, or find no processes).
        self.await_agent(owner, id).await;
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
        let found = match self
            .run(
                "inspect container",
                OP_TIMEOUT,
                api.inspect_container(id, None),
            )
            .await
        {
            Ok(found) => found,
            Err(DockerError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let backend = found
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(LABEL_BACKEND));
        if found.id.as_deref() != Some(id) || backend != Some(&owner.backend) {
            return Err(DockerError::NotFound(format!("container {}", shorten(id))));
        }
        self.shells().forget(id);
        self.known_agents().forget(id);
        let options = RemoveContainerOptions {
            v: true,
            force: true,
            link: false,
        };
        match self
            .run(
                "remove container",
                OP_TIMEOUT,
                api.remove_container(id, Some(options)),
            )
            .await
        {
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
        let mut out = self.list(owner_filters(backend, session)).await?;
        out.retain(|c| {
            c.backend == backend && (session.is_none() || c.session.as_deref() == session)
        });
        Ok(out)
    }

    /// Every container carrying a `wharf.backend` label, whatever its node or backend
    /// (for the orphan reaper), oldest first.
    pub async fn list_all_wharf(&self) -> Result<Vec<ContainerInfo>, DockerError> {
        let filters = HashMap::from([("label".to_string(), vec![LABEL_BACKEND.to_string()])]);
        self.list(filters).await
    }

    async fn list(
        &self,
        filters: HashMap<String, Vec<String>>,
    ) -> Result<Vec<ContainerInfo>, DockerError> {
        let api = self.api().await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        let found = self
            .run(
                "list containers",
                OP_TIMEOUT,
                api.list_containers(Some(options)),
            )
            .await?;
        let mut out: Vec<ContainerInfo> = found
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_container_networks_are_refused() {
        assert_eq!(network_mode(&Network::None).ok().as_deref(), Some("none"));
        assert!(matches!(
            network_mode(&Network::Named("host".into())),
            Err(DockerError::Refused(_))
        ));
        assert!(matches!(
            network_mode(&Network::Named("HOST".into())),
            Err(DockerError::Refused(_))
        ));
        assert!(matches!(
            network_mode(&Network::Named("container:abc".into())),
            Err(DockerError::Refused(_))
        ));
        assert_eq!(
            network_mode(&Network::Named("mynet".into()))
                .ok()
                .as_deref(),
            Some("mynet")
        );
    }

    #[test]
    fn specs_are_checked() {
        let spec = ContainerSpec {
            image: "img".into(),
            command: Some(vec![]),
            ..Default::default()
        };
        assert!(matches!(
            create_body(&spec, HashMap::new()),
            Err(DockerError::Invalid(_))
        ));
        let spec = ContainerSpec {
            image: "img".into(),
            work_volume: Some("work".into()),
            ..Default::default()
        };
        assert!(matches!(
            create_body(&spec, HashMap::new()),
            Err(DockerError::Invalid(_))
        ));
        let spec = ContainerSpec {
            image: "img".into(),
            env: vec![("A=B".into(), "c".into())],
            ..Default::default()
        };
        assert!(matches!(
            create_body(&spec, HashMap::new()),
            Err(DockerError::Invalid(_))
        ));
        let spec = ContainerSpec {
            image: "img".into(),
            cpu_millis: Some(1500),
            memory_bytes: Some(64 << 20),
            read_only_root: true,
            work_volume: Some("/work".into()),
            ..Default::default()
        };
        let body = create_body(&spec, HashMap::new()).unwrap_or_default();
        let hc = body.host_config.unwrap_or_default();
        assert_eq!(hc.nano_cpus, Some(1_500_000_000));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(body.volumes, Some(vec!["/work".to_string()]));
        assert!(container_name("my backend!").starts_with("wharf-my-backend--"));
    }
}

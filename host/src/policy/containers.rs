//! Containers against the grants: the image, the network, the mounts and the ceilings of
//! one container request. Pure.

use super::{Denial, Grants, MountAsk, MountGrant};

fn pattern_matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// The network a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkRequest {
    /// No network (the default).
    None,
    /// Docker's default bridge.
    Bridge,
    /// A named network.
    Named(String),
}

/// What a container request asks for, as the policy sees it.
#[derive(Debug, Clone)]
pub struct ContainerRequest<'a> {
    /// Image reference.
    pub image: &'a str,
    /// The image is a snapshot the host granted this call (outside `grants.images`).
    pub image_granted: bool,
    /// CPU in milli-CPUs.
    pub cpu_millis: Option<u32>,
    /// Memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Process limit.
    pub pids_limit: Option<u32>,
    /// Host paths to mount, already resolved (see [`Grants::check_mount`]).
    pub host_mounts: Vec<MountAsk<'a>>,
    /// The `host_mounts` grants with their paths resolved; needed when mounts are asked.
    pub resolved_grants: Option<&'a [MountGrant]>,
    /// Network.
    pub network: &'a NetworkRequest,
    /// Containers the backend has now.
    pub backend_containers: u32,
    /// Containers the calling session has now.
    pub session_containers: u32,
}

/// The limits a granted container runs with: what was asked, or the ceiling when nothing
/// was asked (a sandbox is never less limited than the grants say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveLimits {
    /// Milli-CPUs.
    pub cpu_millis: u32,
    /// Bytes.
    pub memory_bytes: u64,
    /// Processes.
    pub pids_limit: u32,
}

/// `asked`, or `granted` when nothing was asked; more than `granted` is refused with
/// `refusal`'s words, never lowered.
fn at_most<T: PartialOrd + Copy>(
    asked: Option<T>,
    granted: T,
    refusal: impl FnOnce(T) -> String,
) -> Result<T, Denial> {
    let value = asked.unwrap_or(granted);
    if value > granted {
        return Err(Denial(refusal(value)));
    }
    Ok(value)
}

impl Grants {
    /// Checks an image reference.
    pub fn check_image(&self, image: &str) -> Result<(), Denial> {
        if self.images.iter().any(|p| pattern_matches(p, image)) {
            Ok(())
        } else {
            Err(Denial(format!(
                "image `{image}` is not granted: {}",
                self.how_to_grant("images", image, &self.images)
            )))
        }
    }

    /// Checks a whole container request and returns the limits it runs with.
    pub fn check_container(&self, req: &ContainerRequest<'_>) -> Result<EffectiveLimits, Denial> {
        if !req.image_granted {
            self.check_image(req.image)?;
        }
        if req.backend_containers >= self.max_containers {
            return Err(Denial(format!(
                "the backend already has {} containers (grants.max_containers)",
                req.backend_containers
            )));
        }
        if req.session_containers >= self.max_containers_per_session {
            return Err(Denial(format!(
                "the session already has {} containers (grants.max_containers_per_session)",
                req.session_containers
            )));
        }
        let cpu = at_most(req.cpu_millis, self.max_cpu_millis, |cpu| {
            format!(
                "{cpu} milli-CPUs asked, {} granted (grants.max_cpu_millis)",
                self.max_cpu_millis
            )
        })?;
        let memory = at_most(req.memory_bytes, self.max_memory_mb << 20, |memory| {
            format!(
                "{} MiB asked, {} MiB granted (grants.max_memory_mb)",
                memory >> 20,
                self.max_memory_mb
            )
        })?;
        let pids = at_most(req.pids_limit, self.max_pids, |pids| {
            format!(
                "{pids} processes asked, {} granted (grants.max_pids)",
                self.max_pids
            )
        })?;
        if !req.host_mounts.is_empty() {
            let resolved = req.resolved_grants.ok_or_else(|| {
                Denial("grants.host_mounts were not resolved for this request".into())
            })?;
            for mount in &req.host_mounts {
                self.check_mount(mount, resolved)?;
            }
        }
        self.check_network(req.network)?;
        Ok(EffectiveLimits {
            cpu_millis: cpu,
            memory_bytes: memory,
            pids_limit: pids,
        })
    }

    /// Checks a network: `none` always; `host` and `container:*` never; others if granted.
    pub fn check_network(&self, network: &NetworkRequest) -> Result<(), Denial> {
        let name = match network {
            NetworkRequest::None => return Ok(()),
            NetworkRequest::Bridge => "bridge",
            NetworkRequest::Named(n) => n.as_str(),
        };
        if name == "host" || name.starts_with("container:") {
            return Err(Denial(format!("network `{name}` is never allowed")));
        }
        if self.networks.iter().any(|n| n == name) {
            Ok(())
        } else {
            Err(Denial(format!(
                "network `{name}` is not granted (grants.networks = {:?})",
                self.networks
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::MountAsk;
    use crate::policy::tests::grants;
    use std::path::Path;

    fn req<'a>(image: &'a str, network: &'a NetworkRequest) -> ContainerRequest<'a> {
        ContainerRequest {
            image,
            image_granted: false,
            cpu_millis: None,
            memory_bytes: None,
            pids_limit: None,
            host_mounts: vec![],
            resolved_grants: None,
            network,
            backend_containers: 0,
            session_containers: 0,
        }
    }

    #[test]
    fn images_mounts_and_networks() {
        let g = grants();
        let none = NetworkRequest::None;
        assert!(g.check_container(&req("wharf-sandbox:test", &none)).is_ok());
        assert!(g.check_container(&req("busybox:1.36", &none)).is_ok());
        let e = g.check_container(&req("ubuntu:latest", &none)).unwrap_err();
        assert!(e.0.contains("grants.images"), "{e}");
        let resolved = g.mount_grants().unwrap();
        let ro = |p: &'static str| MountAsk {
            requested: p,
            host_path: Path::new(p),
            read_only: true,
        };
        assert!(g.check_mount(&ro("/srv/data/x"), &resolved).is_ok());
        assert!(
            g.check_mount(&ro("/srv/data/../../etc"), &resolved)
                .is_err()
        );
        assert!(g.check_mount(&ro("/srv/database"), &resolved).is_err());
        assert!(g.check_mount(&ro("relative"), &resolved).is_err());
        assert!(g.check_network(&NetworkRequest::Bridge).is_ok());
        assert!(
            g.check_network(&NetworkRequest::Named("host".into()))
                .is_err()
        );
        assert!(
            g.check_network(&NetworkRequest::Named("container:abc".into()))
                .is_err()
        );
        assert!(
            g.check_network(&NetworkRequest::Named("other".into()))
                .unwrap_err()
                .0
                .contains("grants.networks")
        );
        assert!(
            Grants::default()
                .check_network(&NetworkRequest::Bridge)
                .is_err()
        );
    }

    #[test]
    fn ceilings_refuse_rather_than_clamp() {
        let g = grants();
        let none = NetworkRequest::None;
        let mut r = req("wharf-sandbox:test", &none);
        let limits = g.check_container(&r).unwrap();
        assert_eq!(limits.memory_bytes, 2048 << 20);
        r.memory_bytes = Some(4096 << 20);
        assert!(
            g.check_container(&r)
                .unwrap_err()
                .0
                .contains("max_memory_mb")
        );
        r.memory_bytes = Some(64 << 20);
        r.cpu_millis = Some(8000);
        assert!(
            g.check_container(&r)
                .unwrap_err()
                .0
                .contains("max_cpu_millis")
        );
        r.cpu_millis = None;
        r.session_containers = 4;
        assert!(g.check_container(&r).unwrap_err().0.contains("per_session"));
    }

    #[test]
    fn unresolved_mount_grants_refuse() {
        let ask = MountAsk {
            requested: "/srv/data/x",
            host_path: Path::new("/srv/data/x"),
            read_only: true,
        };
        let none = NetworkRequest::None;
        let mut r = req("wharf-sandbox:test", &none);
        r.host_mounts = vec![ask];
        assert!(
            grants().check_container(&r).is_err(),
            "unresolved grants refuse"
        );
    }
}

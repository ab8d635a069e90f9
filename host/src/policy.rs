//! What each backend is granted, and the checks against it. Pure: no wasmtime, no Docker.
//! A request for more than is granted is refused with a message naming the grant; it is
//! never silently weakened.

use ipnet::IpNet;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

/// The operator's grants for one backend (`[backends.NAME.grants]`). Everything defaults
/// to nothing: no images, no mounts, no networks beyond `none`, no outbound HTTP.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Grants {
    /// Container images, exact or ending in `*` (`wharf-sandbox:*`).
    pub images: Vec<String>,
    /// Containers the backend may have at once.
    pub max_containers: u32,
    /// Containers one session may have at once.
    pub max_containers_per_session: u32,
    /// CPU ceiling per container, in milli-CPUs.
    pub max_cpu_millis: u32,
    /// Memory ceiling per container, in MiB.
    pub max_memory_mb: u64,
    /// Process ceiling per container.
    pub max_pids: u32,
    /// Host paths (and everything under them) that may be mounted, read-only; an entry
    /// written `rw:/path` may also be mounted read-write (`ro:/path` is the same as `/path`).
    /// Checked against the resolved path, symlinks followed, on both sides.
    pub host_mounts: Vec<String>,
    /// Networks beyond `none`: `bridge` or a named network.
    pub networks: Vec<String>,
    /// Outbound HTTP `host:port` patterns: `api.example.com:443`, `*.example.com:443`,
    /// `127.0.0.1:*`.
    pub http_hosts: Vec<String>,
    /// Address ranges normally refused (loopback, private, link-local, metadata) that this
    /// backend may reach anyway, e.g. `127.0.0.0/8`.
    pub http_private_cidrs: Vec<String>,
    /// Largest outbound request body, bytes.
    pub max_http_request_bytes: u64,
    /// Largest response body, bytes.
    pub max_http_response_bytes: u64,
    /// Connect + first-byte timeout, ms.
    pub http_timeout_ms: u64,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            images: Vec::new(),
            max_containers: 16,
            max_containers_per_session: 4,
            max_cpu_millis: 2_000,
            max_memory_mb: 2_048,
            max_pids: 512,
            host_mounts: Vec::new(),
            networks: Vec::new(),
            http_hosts: Vec::new(),
            http_private_cidrs: Vec::new(),
            max_http_request_bytes: 16 << 20,
            max_http_response_bytes: 64 << 20,
            http_timeout_ms: 30_000,
        }
    }
}

/// A refusal, with a message that names the grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denial(pub String);

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

impl Grants {
    /// Checks an image reference.
    pub fn check_image(&self, image: &str) -> Result<(), Denial> {
        if self.images.iter().any(|p| pattern_matches(p, image)) {
            Ok(())
        } else {
            Err(Denial(format!(
                "image `{image}` is not granted (grants.images = {:?})",
                self.images
            )))
        }
    }

    /// Checks a whole container request and returns the limits it runs with.
    pub fn check_container(&self, req: &ContainerRequest<'_>) -> Result<EffectiveLimits, Denial> {
        self.check_image(req.image)?;
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
        let cpu = req.cpu_millis.unwrap_or(self.max_cpu_millis);
        if cpu > self.max_cpu_millis {
            return Err(Denial(format!(
                "{cpu} milli-CPUs asked, {} granted (grants.max_cpu_millis)",
                self.max_cpu_millis
            )));
        }
        let max_memory = self.max_memory_mb << 20;
        let memory = req.memory_bytes.unwrap_or(max_memory);
        if memory > max_memory {
            return Err(Denial(format!(
                "{} MiB asked, {} MiB granted (grants.max_memory_mb)",
                memory >> 20,
                self.max_memory_mb
            )));
        }
        let pids = req.pids_limit.unwrap_or(self.max_pids);
        if pids > self.max_pids {
            return Err(Denial(format!(
                "{pids} processes asked, {} granted (grants.max_pids)",
                self.max_pids
            )));
        }
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

    /// The `host_mounts` entries, parsed.
    pub fn mount_grants(&self) -> Result<Vec<MountGrant>, Denial> {
        self.host_mounts
            .iter()
            .map(|e| MountGrant::parse(e))
            .collect()
    }

    /// Checks one mount whose host path the caller resolved (symlinks followed) against
    /// grants resolved the same way: it must lie under a granted path, and a writable
    /// mount needs an `rw:` grant covering it. Messages name the path as requested, never
    /// what it resolved to.
    pub fn check_mount(&self, ask: &MountAsk<'_>, resolved: &[MountGrant]) -> Result<(), Denial> {
        check_mount_path(ask.requested)?;
        let covering: Vec<&MountGrant> = resolved
            .iter()
            .filter(|g| ask.host_path.starts_with(&g.path))
            .collect();
        if covering.is_empty() {
            return Err(Denial(format!(
                "host path `{}` is not granted, or resolves outside what is (grants.host_mounts = {:?})",
                ask.requested.escape_debug(),
                self.host_mounts
            )));
        }
        if !ask.read_only && !covering.iter().any(|g| g.read_write) {
            return Err(Denial(format!(
                "host path `{}` is granted read-only: a writable mount needs an `rw:` entry (grants.host_mounts = {:?})",
                ask.requested.escape_debug(),
                self.host_mounts
            )));
        }
        Ok(())
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

    /// Whether outbound HTTP to `host:port` is granted by name.
    pub fn http_host_allowed(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.http_hosts.iter().any(|pattern| {
            let Some((p_host, p_port)) = pattern.rsplit_once(':') else {
                return false;
            };
            let port_ok = p_port == "*" || p_port.parse::<u16>().is_ok_and(|p| p == port);
            let p_host = p_host.to_ascii_lowercase();
            let host_ok = p_host == "*"
                || p_host == host
                || p_host
                    .strip_prefix("*.")
                    .is_some_and(|suffix| host.ends_with(&format!(".{suffix}")));
            port_ok && host_ok
        })
    }

    /// Whether a resolved address may be connected to: public addresses yes; loopback,
    /// private, link-local (cloud metadata), CGNAT, unspecified and multicast only inside a
    /// granted `http_private_cidrs` range. IPv4-mapped IPv6 is checked as IPv4.
    pub fn ip_allowed(&self, ip: IpAddr) -> bool {
        let ip = normalize(ip);
        if !is_restricted(ip) {
            return true;
        }
        self.http_private_cidrs
            .iter()
            .filter_map(|c| c.parse::<IpNet>().ok())
            .any(|net| net.contains(&ip))
    }

    /// Checks that every configured CIDR and mount grant parses.
    pub fn validate(&self) -> Result<(), Denial> {
        self.mount_grants()?;
        for cidr in &self.http_private_cidrs {
            cidr.parse::<IpNet>()
                .map_err(|e| Denial(format!("grants.http_private_cidrs: `{cidr}`: {e}")))?;
        }
        Ok(())
    }
}

/// One `host_mounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountGrant {
    /// The granted host path (as written, or resolved by the caller).
    pub path: PathBuf,
    /// Whether mounts under it may be writable (`rw:`).
    pub read_write: bool,
}

impl MountGrant {
    /// Parses `/path`, `ro:/path` or `rw:/path`; the path must be absolute without `..`.
    pub fn parse(entry: &str) -> Result<Self, Denial> {
        let (read_write, path) = match entry.split_once(':') {
            Some(("rw", path)) => (true, path),
            Some(("ro", path)) => (false, path),
            _ => (false, entry),
        };
        check_mount_path(path)
            .map_err(|d| Denial(format!("grants.host_mounts entry `{entry}`: {d}")))?;
        Ok(MountGrant {
            path: PathBuf::from(path),
            read_write,
        })
    }
}

/// One mount a container asks for, its host path resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountAsk<'a> {
    /// The host path as the guest asked for it.
    pub requested: &'a str,
    /// The host path with every symlink followed.
    pub host_path: &'a Path,
    /// Whether the guest asked for a read-only mount.
    pub read_only: bool,
}

/// A host path as text: absolute, without `..`, without NUL or control characters.
pub fn check_mount_path(host_path: &str) -> Result<(), Denial> {
    let path = Path::new(host_path);
    if !path.is_absolute()
        || path.components().any(|c| matches!(c, Component::ParentDir))
        || host_path.chars().any(char::is_control)
    {
        return Err(Denial(format!(
            "mount `{}` must be an absolute path without `..` (grants.host_mounts)",
            host_path.escape_debug()
        )));
    }
    Ok(())
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as plain IPv4.
pub fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn is_restricted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4().is_some_and(|v4| is_restricted(IpAddr::V4(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants() -> Grants {
        Grants {
            images: vec!["wharf-sandbox:*".into(), "busybox:1.36".into()],
            host_mounts: vec!["/srv/data".into()],
            networks: vec!["bridge".into()],
            http_hosts: vec![
                "api.example.com:443".into(),
                "*.example.org:*".into(),
                "127.0.0.1:8080".into(),
            ],
            http_private_cidrs: vec!["127.0.0.0/8".into()],
            ..Grants::default()
        }
    }

    fn req<'a>(image: &'a str, network: &'a NetworkRequest) -> ContainerRequest<'a> {
        ContainerRequest {
            image,
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
    fn mounts_are_read_only_unless_an_rw_grant_covers_them() {
        let g = Grants {
            host_mounts: vec![
                "/srv/data".into(),
                "rw:/srv/data/scratch".into(),
                "ro:/opt".into(),
            ],
            ..Grants::default()
        };
        let resolved = g.mount_grants().unwrap();
        assert_eq!(
            resolved,
            vec![
                MountGrant {
                    path: "/srv/data".into(),
                    read_write: false
                },
                MountGrant {
                    path: "/srv/data/scratch".into(),
                    read_write: true
                },
                MountGrant {
                    path: "/opt".into(),
                    read_write: false
                },
            ]
        );
        let ask = |p: &'static str, read_only| MountAsk {
            requested: p,
            host_path: Path::new(p),
            read_only,
        };
        assert!(g.check_mount(&ask("/srv/data/x", true), &resolved).is_ok());
        let e = g
            .check_mount(&ask("/srv/data/x", false), &resolved)
            .unwrap_err();
        assert!(e.0.contains("rw:"), "{e}");
        assert!(
            g.check_mount(&ask("/srv/data/scratch/a", false), &resolved)
                .is_ok()
        );
        assert!(g.check_mount(&ask("/opt", false), &resolved).is_err());
        for bad in ["rw:relative", "/a/../b", "rw:", "data"] {
            let g = Grants {
                host_mounts: vec![bad.into()],
                ..Grants::default()
            };
            assert!(g.validate().is_err(), "{bad}");
        }
        let none = NetworkRequest::None;
        let mut r = req("wharf-sandbox:test", &none);
        r.host_mounts = vec![ask("/srv/data/x", true)];
        assert!(
            grants().check_container(&r).is_err(),
            "unresolved grants refuse"
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
    fn http_hosts_and_addresses() {
        let g = grants();
        assert!(g.http_host_allowed("api.example.com", 443));
        assert!(g.http_host_allowed("API.example.com.", 443));
        assert!(!g.http_host_allowed("api.example.com", 80));
        assert!(g.http_host_allowed("a.b.example.org", 8443));
        assert!(!g.http_host_allowed("example.org", 443));
        assert!(!g.http_host_allowed("evil-example.org", 443));
        assert!(g.http_host_allowed("127.0.0.1", 8080));
        let d = Grants::default();
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.3.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(!d.ip_allowed(ip.parse().unwrap()), "{ip} must be refused");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "::ffff:93.184.216.34",
        ] {
            assert!(d.ip_allowed(ip.parse().unwrap()), "{ip} is public");
        }
        assert!(g.ip_allowed("127.0.0.1".parse().unwrap()));
        assert!(g.ip_allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!g.ip_allowed("169.254.169.254".parse().unwrap()));
    }
}

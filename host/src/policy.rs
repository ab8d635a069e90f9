//! What each backend is granted, and the checks against it. Pure: no wasmtime, no Docker.
//! A request for more than is granted is refused with a message naming the grant; it is
//! never silently weakened.

mod containers;
mod egress;
mod grants_growth;
mod isolation;
mod mounts;
mod outbound_http;
mod secrets;

pub use containers::{ContainerRequest, EffectiveLimits, NetworkRequest};
pub use egress::{EgressAsk, EgressRefusal, EgressRule, HostPattern, MAX_EGRESS_ENTRIES};
pub use grants_growth::{GrantsAdded, grants_beyond};
pub use isolation::{
    Isolation, MAX_USER_BYTES, SandboxProfile, SandboxVolume, check_asked, check_user,
    granted_levels,
};
pub use mounts::{MountAsk, MountGrant, check_mount_path};
pub use outbound_http::normalize;
pub use secrets::{
    MAX_SECRET_BYTES, MAX_SECRET_NAME_BYTES, MAX_SECRETS, SecretGrants, SecretSource,
    check_secret_name,
};

use ipnet::IpNet;
use serde::Deserialize;

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
    /// Outbound requests of all the backend's instances in flight at once (each holds a
    /// socket until its answer is read or dropped); one more is refused.
    pub max_http_in_flight: u32,
    /// Outbound requests one call (one instance) may have in flight at once.
    pub max_http_in_flight_per_call: u32,
    /// Secrets handed to the backend by name (`secrets` import, contract 0.3.0):
    /// `NAME = "env:VARIABLE"` or `NAME = "file:/absolute/path"`, read when asked.
    pub secrets: SecretGrants,
    /// Isolation levels the backend's containers may run at (`container`, `gvisor`); the
    /// first is what they get when nobody asks for one. Each level other than `container`
    /// needs the operator's `[server.runtimes]` to name an engine runtime for it.
    pub isolation: Vec<String>,
    /// Names a session may ask its sandbox to reach through the host's egress proxy
    /// (`network.allow_egress_to`): `host`, `host:port`, `*.suffix[:port]`, `*` (no port:
    /// any port). A session's pattern must be covered by one of these.
    pub egress_to: Vec<String>,
    /// Address ranges a session may ask for (`network.allow_egress_to_cidrs`): reachable
    /// by address, and where a listed name may resolve to a private or loopback address.
    pub egress_cidrs: Vec<String>,
    /// Whether the backend's sandboxes may mount their tenant's named volumes (a session
    /// config's `volumes`, issue 37). Off by default.
    pub volumes: bool,
    /// Bytes (both ways) one session's sandboxes may move through the egress proxy.
    pub max_egress_bytes_per_session: u64,
    /// Connections one sandbox may have open through the egress proxy at once (at most 31).
    pub max_egress_connections: u32,
    /// Who gave these grants, so a refusal names the fix that applies (never from config).
    #[serde(skip)]
    pub granted_by: GrantedBy,
}

/// Who gave a backend its grants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrantedBy {
    /// The operator's config (`[backends.NAME.grants]` or a sidecar).
    #[default]
    Operator,
    /// `wharf dev`: what the backend declares in `requires`, plus loopback HTTP.
    Dev,
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
            max_http_in_flight: 64,
            max_http_in_flight_per_call: 16,
            secrets: SecretGrants::default(),
            isolation: vec!["container".to_string()],
            egress_to: Vec::new(),
            egress_cidrs: Vec::new(),
            volumes: false,
            max_egress_bytes_per_session: 1 << 30,
            max_egress_connections: 16,
            granted_by: GrantedBy::Operator,
        }
    }
}

/// A refusal, with a message that names the grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denial(pub String);

impl Grants {
    /// What makes `value` granted under `grant` (`http_hosts`, `images`, …), in the words
    /// of whoever gives this backend its grants: the operator's config, or under `wharf dev`
    /// the backend's own `requires`.
    pub fn how_to_grant(&self, grant: &str, value: &str, now: &[String]) -> String {
        match self.granted_by {
            GrantedBy::Operator => {
                format!("add `{value}` to grants.{grant} (now {now:?})")
            }
            GrantedBy::Dev if grant == "http_private_cidrs" => format!(
                "`wharf dev` grants HTTP to loopback only; `{value}` needs an operator's grants.http_private_cidrs under `wharf serve` (now {now:?})"
            ),
            GrantedBy::Dev if grant == "isolation" => format!(
                "`wharf dev` runs containers at the levels of its default grants; `{value}` needs an operator's grants.isolation under `wharf serve` (now {now:?})"
            ),
            GrantedBy::Dev => format!(
                "declare `{value}` in the backend's `requires` {grant} and save: `wharf dev` grants what the backend declares (now {now:?})"
            ),
        }
    }

    /// The isolation level a container runs at: `asked`, or the first granted level when
    /// nothing was asked; a level not granted is refused, never weakened.
    pub fn isolation_for(&self, asked: Option<Isolation>) -> Result<Isolation, Denial> {
        let granted = granted_levels(&self.isolation)?;
        match asked {
            None => Ok(granted[0]),
            Some(level) if granted.contains(&level) => Ok(level),
            Some(level) => Err(Denial(format!(
                "isolation `{level}` is not granted: {}",
                self.how_to_grant("isolation", level.name(), &self.isolation)
            ))),
        }
    }

    /// Checks that every configured CIDR and mount grant parses.
    pub fn validate(&self) -> Result<(), Denial> {
        self.mount_grants()?;
        self.egress_host_grants()?;
        self.egress_cidr_grants()?;
        if !(1..=31).contains(&self.max_egress_connections) {
            return Err(Denial(format!(
                "grants.max_egress_connections = {}: must be between 1 and 31",
                self.max_egress_connections
            )));
        }
        for cidr in &self.http_private_cidrs {
            cidr.parse::<IpNet>()
                .map_err(|e| Denial(format!("grants.http_private_cidrs: `{cidr}`: {e}")))?;
        }
        for (key, value) in [
            ("max_http_in_flight", self.max_http_in_flight),
            (
                "max_http_in_flight_per_call",
                self.max_http_in_flight_per_call,
            ),
        ] {
            if !(1..=4096).contains(&value) {
                return Err(Denial(format!(
                    "grants.{key} = {value}: must be between 1 and 4096"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Grants the policy tests share (also `outbound_http`'s).
    pub(super) fn grants() -> Grants {
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

    #[test]
    fn isolation_is_the_ask_or_the_first_granted_level_never_weaker() {
        let mut g = grants();
        assert_eq!(g.isolation_for(None), Ok(Isolation::Container));
        let denied = g.isolation_for(Some(Isolation::Gvisor)).unwrap_err();
        assert!(denied.0.contains("grants.isolation"), "{denied}");
        g.isolation = vec!["gvisor".into(), "container".into()];
        assert_eq!(g.isolation_for(None), Ok(Isolation::Gvisor));
        assert_eq!(
            g.isolation_for(Some(Isolation::Container)),
            Ok(Isolation::Container)
        );
        g.isolation = vec!["kata".into()];
        assert!(g.isolation_for(None).is_err());
    }
}

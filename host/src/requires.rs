//! What a component declares it will reach (its `requires`), and what an upgrade declares
//! beyond the running version (the diff an admin approves). Shared names, kept in a leaf:
//! the runtime reads them from components, the registry holds upgrades on them, adapters
//! show them.

/// Capabilities a component declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Requires {
    /// Container images.
    pub images: Vec<String>,
    /// Outbound HTTP `host:port` patterns.
    pub http_hosts: Vec<String>,
    /// Docker networks.
    pub networks: Vec<String>,
    /// Host paths to mount.
    pub host_mounts: Vec<String>,
}

/// Entries of `new` that `old` does not declare.
pub fn requires_beyond(new: &Requires, old: &Requires) -> Requires {
    let diff = |n: &[String], o: &[String]| -> Vec<String> {
        n.iter().filter(|x| !o.contains(x)).cloned().collect()
    };
    Requires {
        images: diff(&new.images, &old.images),
        http_hosts: diff(&new.http_hosts, &old.http_hosts),
        networks: diff(&new.networks, &old.networks),
        host_mounts: diff(&new.host_mounts, &old.host_mounts),
    }
}

impl Requires {
    /// Whether it declares nothing.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
            && self.http_hosts.is_empty()
            && self.networks.is_empty()
            && self.host_mounts.is_empty()
    }
}

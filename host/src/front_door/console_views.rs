//! What the operator's console (`api/console`) needs of the host beyond what the REST
//! routes use: a backend's grants as plain lines (the grants' type is `policy`'s, which no
//! adapter names).

use super::Wharf;

/// One granted capability, as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantLine {
    /// What is granted (`images`, `http_hosts`, …: the config's key).
    pub what: &'static str,
    /// The granted values, or the limit.
    pub values: Vec<String>,
}

impl Wharf {
    /// The operator's grants of backend `name` (none for a name that is not loaded): what
    /// its imports may reach, the lists that are not empty and the container limits.
    /// Secrets by name only, never where they are read from.
    pub fn backend_grants(&self, name: &str) -> Vec<GrantLine> {
        let Some(config) = self.backend_config(name) else {
            return Vec::new();
        };
        let g = &config.grants;
        let mut lines = Vec::new();
        for (what, values) in [
            ("images", &g.images),
            ("networks", &g.networks),
            ("host_mounts", &g.host_mounts),
            ("http_hosts", &g.http_hosts),
            ("http_private_cidrs", &g.http_private_cidrs),
            ("egress_to", &g.egress_to),
            ("egress_cidrs", &g.egress_cidrs),
            ("isolation", &g.isolation),
        ] {
            if !values.is_empty() {
                lines.push(GrantLine {
                    what,
                    values: values.clone(),
                });
            }
        }
        if g.volumes {
            lines.push(GrantLine {
                what: "volumes",
                values: vec!["the tenant's named volumes".to_string()],
            });
        }
        let secrets: Vec<String> = g.secrets.names().map(str::to_string).collect();
        if !secrets.is_empty() {
            lines.push(GrantLine {
                what: "secrets",
                values: secrets,
            });
        }
        if !g.images.is_empty() {
            lines.push(GrantLine {
                what: "max_containers",
                values: vec![
                    g.max_containers.to_string(),
                    format!("{} per session", g.max_containers_per_session),
                ],
            });
        }
        lines
    }
}

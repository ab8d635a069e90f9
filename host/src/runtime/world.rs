//! Which contract version and which world a component targets, read from its exports;
//! the versions this host serves, and the refusal of any other (ARCHITECTURE.md,
//! "Contract versions").

use anyhow::{Result, bail};
use serde::Serialize;
use wasmtime::Engine;
use wasmtime::component::Component;

/// The WIT package of the contract.
pub const WIT_PACKAGE: &str = "wharf:plugin";

/// A released version of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ContractVersion {
    /// `wharf:plugin@0.1.0`, frozen; served through adapters.
    #[serde(rename = "0.1.0")]
    V0_1,
    /// `wharf:plugin@0.2.0`, the current contract.
    #[serde(rename = "0.2.0")]
    V0_2,
}

impl ContractVersion {
    /// Every version this host serves, oldest first.
    pub const SUPPORTED: [ContractVersion; 2] = [ContractVersion::V0_1, ContractVersion::V0_2];
    /// The version the SDK builds against.
    pub const CURRENT: ContractVersion = ContractVersion::V0_2;

    /// `0.1.0`, `0.2.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => "0.1.0",
            ContractVersion::V0_2 => "0.2.0",
        }
    }

    /// The version named `text`, if served.
    pub fn parse(text: &str) -> Option<Self> {
        Self::SUPPORTED.into_iter().find(|v| v.as_str() == text)
    }

    /// Whether backends built against this version are told, at load, to move on.
    pub fn deprecated(self) -> bool {
        self < Self::CURRENT
    }

    fn supported_list() -> String {
        Self::SUPPORTED
            .iter()
            .map(|v| format!("{WIT_PACKAGE}@{}", v.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{WIT_PACKAGE}@{}", self.as_str())
    }
}

/// The kind of world a component targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorldKind {
    /// Exports `backend`.
    ResourceBackend,
    /// Exports `provider`.
    SandboxProvider,
}

/// What a component targets: a world of a contract version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// The world.
    pub kind: WorldKind,
    /// The contract version.
    pub version: ContractVersion,
}

/// Finds what a component targets from its exported interface names.
pub fn detect(engine: &Engine, component: &Component) -> Result<Target> {
    let names: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    target_from_exports(&names)
}

/// Pure part of [`detect`]: refuses a version this host does not serve, naming the ones
/// it does.
pub fn target_from_exports(names: &[String]) -> Result<Target> {
    let mut found = None;
    for name in names {
        let Some(rest) = name.strip_prefix(&format!("{WIT_PACKAGE}/")) else {
            continue;
        };
        let (iface, version) = rest.split_once('@').unwrap_or((rest, "unversioned"));
        let Some(version) = ContractVersion::parse(version) else {
            bail!(
                "the component was built against {WIT_PACKAGE}@{version}; this host serves {}",
                ContractVersion::supported_list()
            );
        };
        let kind = match iface {
            "backend" => WorldKind::ResourceBackend,
            "provider" => WorldKind::SandboxProvider,
            _ => continue,
        };
        found = Some(Target { kind, version });
    }
    match found {
        Some(target) => Ok(target),
        None => bail!(
            "the component exports neither {WIT_PACKAGE}/backend nor {WIT_PACKAGE}/provider \
             of a served version ({}); exports: {}",
            ContractVersion::supported_list(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn detects_worlds_of_every_served_version() {
        let t = target_from_exports(&names(&["wharf:plugin/backend@0.1.0"])).unwrap();
        assert_eq!(
            (t.kind, t.version),
            (WorldKind::ResourceBackend, ContractVersion::V0_1)
        );
        let t = target_from_exports(&names(&["wharf:plugin/provider@0.2.0"])).unwrap();
        assert_eq!(
            (t.kind, t.version),
            (WorldKind::SandboxProvider, ContractVersion::V0_2)
        );
        assert!(ContractVersion::V0_1.deprecated() && !ContractVersion::V0_2.deprecated());
    }

    #[test]
    fn refuses_unknown_versions_naming_the_served_ones() {
        let err = target_from_exports(&names(&["wharf:plugin/backend@0.9.0"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("wharf:plugin@0.9.0"), "{err}");
        assert!(
            err.contains("wharf:plugin@0.1.0, wharf:plugin@0.2.0"),
            "{err}"
        );
        let err = target_from_exports(&names(&["wasi:cli/run@0.2.0"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("exports neither"), "{err}");
    }
}

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
    /// `wharf:plugin@0.2.0`, frozen; its interfaces are 0.3.0's too.
    #[serde(rename = "0.2.0")]
    V0_2,
    /// `wharf:plugin@0.3.0`, the current contract: 0.2.0's interfaces and `secrets`.
    #[serde(rename = "0.3.0")]
    V0_3,
}

impl ContractVersion {
    /// Every version this host serves, oldest first.
    pub const SUPPORTED: [ContractVersion; 3] = [
        ContractVersion::V0_1,
        ContractVersion::V0_2,
        ContractVersion::V0_3,
    ];
    /// The version the SDK builds against.
    pub const CURRENT: ContractVersion = ContractVersion::V0_3;

    /// `0.1.0`, `0.2.0`, `0.3.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => "0.1.0",
            ContractVersion::V0_2 => "0.2.0",
            ContractVersion::V0_3 => "0.3.0",
        }
    }

    /// The version named `text`, if served.
    pub fn parse(text: &str) -> Option<Self> {
        Self::SUPPORTED.into_iter().find(|v| v.as_str() == text)
    }

    /// Whether backends built against this version are told, at load, to move on: their
    /// exports are a shape the current contract replaced (0.1.0's). A 0.2.0 component uses
    /// only interfaces 0.3.0 keeps as they are, so it is current.
    pub fn deprecated(self) -> bool {
        self < ContractVersion::V0_2
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

/// Finds what a component targets from its exported and imported interface names.
pub fn detect(engine: &Engine, component: &Component) -> Result<Target> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let imports: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    target_from_names(&exports, &imports)
}

/// The interface and served version of a `wharf:plugin` name; `None` for another package's.
fn contract_interface(name: &str) -> Result<Option<(&str, ContractVersion)>> {
    let Some(rest) = name
        .strip_prefix(WIT_PACKAGE)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return Ok(None);
    };
    let (iface, version) = rest.split_once('@').unwrap_or((rest, "unversioned"));
    match ContractVersion::parse(version) {
        Some(version) => Ok(Some((iface, version))),
        None => bail!(
            "the component was built against {WIT_PACKAGE}@{version}; this host serves {}",
            ContractVersion::supported_list()
        ),
    }
}

/// Pure part of [`detect`]: the world from the exports, the version the newest of the
/// contract's interfaces it exports or imports (0.3.0 keeps 0.2.0's interfaces under their
/// 0.2.0 names, so a component that imports nothing new is a 0.2.0 component: the optional
/// 0.3.0 exports the SDK always offers, such as `tool-listing`, ask nothing of a host, which
/// looks them up whatever the version). Refuses a
/// version this host does not serve, naming the ones it does.
pub fn target_from_names(exports: &[String], imports: &[String]) -> Result<Target> {
    let mut found = None;
    for name in exports {
        let Some((iface, version)) = contract_interface(name)? else {
            continue;
        };
        let kind = match iface {
            "backend" => WorldKind::ResourceBackend,
            "provider" => WorldKind::SandboxProvider,
            _ => continue,
        };
        found = Some(Target { kind, version });
    }
    if let Some(target) = &mut found {
        for name in imports {
            if let Some((_, version)) = contract_interface(name)? {
                target.version = target.version.max(version);
            }
        }
    }
    match found {
        Some(target) => Ok(target),
        None => bail!(
            "the component exports neither {WIT_PACKAGE}/backend nor {WIT_PACKAGE}/provider \
             of a served version ({}); exports: {}",
            ContractVersion::supported_list(),
            if exports.is_empty() {
                "none".to_string()
            } else {
                exports.join(", ")
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
        let t = target_from_names(&names(&["wharf:plugin/backend@0.1.0"]), &[]).unwrap();
        assert_eq!(
            (t.kind, t.version),
            (WorldKind::ResourceBackend, ContractVersion::V0_1)
        );
        let t = target_from_names(&names(&["wharf:plugin/provider@0.2.0"]), &[]).unwrap();
        assert_eq!(
            (t.kind, t.version),
            (WorldKind::SandboxProvider, ContractVersion::V0_2)
        );
        // A 0.3.0 component exports 0.2.0's interfaces and imports 0.3.0's.
        let imports = names(&["wharf:plugin/kv@0.2.0", "wharf:plugin/secrets@0.3.0"]);
        let t = target_from_names(&names(&["wharf:plugin/backend@0.2.0"]), &imports).unwrap();
        assert_eq!(
            (t.kind, t.version),
            (WorldKind::ResourceBackend, ContractVersion::V0_3)
        );
        // An optional 0.3.0 export beside 0.2.0's `backend` asks nothing of the host.
        let exports = names(&[
            "wharf:plugin/backend@0.2.0",
            "wharf:plugin/tool-listing@0.3.0",
        ]);
        let t = target_from_names(&exports, &[]).unwrap();
        assert_eq!(t.version, ContractVersion::V0_2);
        assert!(ContractVersion::V0_1.deprecated());
        assert!(!ContractVersion::V0_2.deprecated() && !ContractVersion::V0_3.deprecated());
    }

    #[test]
    fn refuses_unknown_versions_naming_the_served_ones() {
        let err = target_from_names(&names(&["wharf:plugin/backend@0.9.0"]), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("wharf:plugin@0.9.0"), "{err}");
        assert!(
            err.contains("wharf:plugin@0.1.0, wharf:plugin@0.2.0, wharf:plugin@0.3.0"),
            "{err}"
        );
        // An import of an unserved version is refused at load, not at instantiation.
        let err = target_from_names(
            &names(&["wharf:plugin/backend@0.2.0"]),
            &names(&["wharf:plugin/sandbox@0.4.0"]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("wharf:plugin@0.4.0"), "{err}");
        // `wharf:pluginx/...` is another package.
        assert!(
            contract_interface("wharf:pluginx/backend@9.9.9")
                .unwrap()
                .is_none()
        );
        let err = target_from_names(&names(&["wasi:cli/run@0.2.0"]), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("exports neither"), "{err}");
    }
}

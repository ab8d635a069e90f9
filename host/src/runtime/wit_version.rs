//! Which world a component targets, read from its exports, and the refusal of WIT package
//! versions this host does not implement.

use anyhow::{Result, bail};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The WIT package version this host implements.
pub const WIT_PACKAGE: &str = "wharf:plugin";
/// The version of [`WIT_PACKAGE`] this host implements.
pub const WIT_VERSION: &str = "0.1.0";

/// The world a component was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// Exports `backend`.
    ResourceBackend,
    /// Exports `provider`.
    SandboxProvider,
}

/// Finds the world from the component's exported interface names, refusing unknown
/// versions of the package with a message that names the version.
pub fn detect_world(engine: &Engine, component: &Component) -> Result<World> {
    let ty = component.component_type();
    let names: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    world_from_exports(&names)
}

/// Pure part of [`detect_world`].
pub fn world_from_exports(names: &[String]) -> Result<World> {
    let mut found = None;
    for name in names {
        let Some(rest) = name.strip_prefix(&format!("{WIT_PACKAGE}/")) else {
            continue;
        };
        let (iface, version) = rest.split_once('@').unwrap_or((rest, "unversioned"));
        if version != WIT_VERSION {
            bail!(
                "the component was built against {WIT_PACKAGE}@{version}; this host implements \
                 {WIT_PACKAGE}@{WIT_VERSION} only"
            );
        }
        found = match iface {
            "backend" => Some(World::ResourceBackend),
            "provider" => Some(World::SandboxProvider),
            _ => found,
        };
    }
    match found {
        Some(world) => Ok(world),
        None => bail!(
            "the component exports neither {WIT_PACKAGE}/backend@{WIT_VERSION} nor \
             {WIT_PACKAGE}/provider@{WIT_VERSION} (exports: {})",
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

    #[test]
    fn detects_worlds_and_refuses_other_versions() {
        let ok = vec!["wharf:plugin/backend@0.1.0".to_string()];
        assert_eq!(world_from_exports(&ok).unwrap(), World::ResourceBackend);
        let p = vec!["wharf:plugin/provider@0.1.0".to_string()];
        assert_eq!(world_from_exports(&p).unwrap(), World::SandboxProvider);
        let future = vec!["wharf:plugin/backend@0.2.0".to_string()];
        let err = world_from_exports(&future).unwrap_err().to_string();
        assert!(err.contains("wharf:plugin@0.2.0"), "{err}");
        let none = vec!["wasi:cli/run@0.2.0".to_string()];
        assert!(
            world_from_exports(&none)
                .unwrap_err()
                .to_string()
                .contains("exports neither")
        );
    }
}

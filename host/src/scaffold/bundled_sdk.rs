//! The SDKs this binary carries: the Rust crates (`wharf-sdk`, `wharf-sdk-macros`, with the
//! WIT of the contract the binary serves) and the Python package, written into a new
//! backend's `vendor/` so it builds with nothing from this repository and no unpublished
//! registry package. The crates' manifests inherit fields from this workspace; they are
//! written standalone, as `cargo package` would.

use anyhow::{Context, Result, bail};
use std::path::Path;
use toml::{Table, Value};

include!(concat!(env!("OUT_DIR"), "/bundled_sdk.rs"));

/// Whether `wharf-sdk` is on crates.io and PyPI. While it is not, a new backend vendors the
/// SDK this binary carries; once it is, flipping this makes the registry the default and an
/// author changes nothing.
pub const PUBLISHED: bool = false;

/// The directory of a new backend that holds the vendored SDK (`vendor/wharf-sdk`, and for
/// Rust also `vendor/wharf-sdk-macros`).
pub const VENDOR_DIR: &str = "vendor";

/// Writes the Rust SDK crates under `vendor` (`vendor/wharf-sdk`, `vendor/wharf-sdk-macros`).
pub fn write_rust(vendor: &Path) -> Result<()> {
    let workspace: Table =
        toml::from_str(WORKSPACE_MANIFEST).context("the bundled workspace manifest")?;
    for (path, text) in RUST_SDK {
        let contents = if path.ends_with("/Cargo.toml") {
            standalone_manifest(text, &workspace)
                .with_context(|| format!("the bundled `{path}`"))?
        } else {
            (*text).to_string()
        };
        write_file(&vendor.join(path), &contents)?;
    }
    Ok(())
}

/// Writes the Python SDK package into `dir` (a directory `pip install` takes).
pub fn write_python(dir: &Path) -> Result<()> {
    for (path, text) in PYTHON_SDK {
        write_file(&dir.join(path), text)?;
    }
    Ok(())
}

fn write_file(path: &Path, contents: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("cannot write `{}`", path.display()))
}

/// `manifest` with every `workspace = true` replaced by the workspace's value, `[lints]`
/// dropped, and path dependencies pointed at their vendored siblings (`../NAME`).
fn standalone_manifest(manifest: &str, workspace_manifest: &Table) -> Result<String> {
    let mut manifest: Table = toml::from_str(manifest)?;
    let workspace = workspace_manifest
        .get("workspace")
        .and_then(Value::as_table)
        .context("no [workspace]")?;
    let empty = Table::new();
    let inherited_package = workspace
        .get("package")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    let inherited_deps = workspace
        .get("dependencies")
        .and_then(Value::as_table)
        .unwrap_or(&empty);
    if let Some(Value::Table(package)) = manifest.get_mut("package") {
        for (key, value) in package.iter_mut() {
            if inherits(value) {
                *value = inherited_package
                    .get(key)
                    .cloned()
                    .with_context(|| format!("the workspace has no `package.{key}`"))?;
            }
        }
    }
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(Value::Table(deps)) = manifest.get_mut(section) {
            for (name, spec) in deps.iter_mut() {
                *spec = standalone_dependency(name, spec, inherited_deps)?;
            }
        }
    }
    manifest.remove("lints");
    Ok(toml::to_string(&manifest)?)
}

fn inherits(value: &Value) -> bool {
    value
        .as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn standalone_dependency(name: &str, spec: &Value, inherited: &Table) -> Result<Value> {
    let Some(table) = spec.as_table() else {
        return Ok(spec.clone());
    };
    if inherits(spec) {
        let mut out = match inherited.get(name) {
            Some(Value::String(version)) => {
                let mut t = Table::new();
                t.insert("version".into(), Value::String(version.clone()));
                t
            }
            Some(Value::Table(t)) => t.clone(),
            _ => bail!("the workspace has no dependency `{name}`"),
        };
        for (key, value) in table {
            match (key.as_str(), value, out.get_mut(key)) {
                ("workspace", _, _) => {}
                ("features", Value::Array(extra), Some(Value::Array(features))) => {
                    features.extend(extra.iter().cloned());
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
        return Ok(Value::Table(out));
    }
    if table.contains_key("path") {
        let mut out = table.clone();
        out.insert("path".into(), Value::String(format!("../{name}")));
        return Ok(Value::Table(out));
    }
    Ok(spec.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_manifests_stand_alone() {
        let workspace: Table = toml::from_str(WORKSPACE_MANIFEST).unwrap();
        for (path, text) in RUST_SDK.iter().filter(|(p, _)| p.ends_with("Cargo.toml")) {
            let out = standalone_manifest(text, &workspace).unwrap();
            assert!(!out.contains("workspace"), "{path}:\n{out}");
            let parsed: Table = toml::from_str(&out).unwrap();
            let package = parsed["package"].as_table().unwrap();
            assert_eq!(
                package["version"].as_str(),
                Some(env!("CARGO_PKG_VERSION")),
                "{path}"
            );
            if let Some(deps) = parsed.get("dependencies").and_then(Value::as_table) {
                for (name, spec) in deps {
                    if let Some(path) = spec.get("path") {
                        assert_eq!(path.as_str(), Some(format!("../{name}").as_str()));
                    }
                }
            }
        }
    }

    #[test]
    fn an_inherited_dependency_keeps_its_features_and_adds_the_members() {
        let inherited: Table =
            toml::from_str(r#"a = { version = "1", features = ["x"] }"#).unwrap();
        let spec: Value = toml::from_str::<Table>(
            r#"a = { workspace = true, features = ["y"], optional = true }"#,
        )
        .unwrap()["a"]
            .clone();
        let out = standalone_dependency("a", &spec, &inherited).unwrap();
        assert_eq!(out["version"].as_str(), Some("1"));
        assert_eq!(out["features"].as_array().unwrap().len(), 2);
        assert_eq!(out["optional"].as_bool(), Some(true));
        assert!(standalone_dependency("missing", &spec, &inherited).is_err());
    }

    #[test]
    fn both_sdks_carry_their_contract() {
        for (sdk, path) in [
            (RUST_SDK, "wharf-sdk/wit/plugin.wit"),
            (RUST_SDK, "wharf-sdk-macros/src/lib.rs"),
            (PYTHON_SDK, "pyproject.toml"),
            (PYTHON_SDK, "wharf_sdk/wit/plugin.wit"),
        ] {
            assert!(sdk.iter().any(|(p, _)| *p == path), "{path}");
        }
        assert!(
            PYTHON_SDK
                .iter()
                .chain(RUST_SDK)
                .all(|(p, _)| !p.contains("__pycache__") && !p.starts_with('/'))
        );
    }
}

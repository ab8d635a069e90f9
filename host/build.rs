//! Builds the example backends in `plugins/` for wasm32-wasip2 and the sandbox agent in
//! `sandboxd/` (a static binary for this target) and embeds them, so `wharf serve` runs
//! with no files beside the binary and the tests load real components.

use std::path::{Path, PathBuf};
use std::process::Command;

const PLUGINS: &[&str] = &[
    "echo",
    "text-index",
    "scratchpad",
    "misbehaving",
    "remote-provider",
    "docker-provider",
    "probe",
    "backtracker",
    "mcp-bridge",
];

fn main() {
    if let Err(e) = run()
        .and_then(|()| embed_sdks())
        .and_then(|()| embed_sandbox_agent())
    {
        println!("cargo::error={e}");
    }
}

/// The SDK sources `wharf new` writes beside a new backend, as (path inside the vendored
/// tree, file on this machine): the Rust crates with their WIT, and the Python package.
/// Generated so a file added to an SDK is carried without a list to keep by hand.
fn embed_sdks() -> Result<(), String> {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir.parent().ok_or("no workspace root")?;
    for watched in [
        "Cargo.toml",
        "sdk/README.md",
        "sdk/python/pyproject.toml",
        "sdk/python/README.md",
        "sdk/python/wharf_sdk",
    ] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
    let mut rust = Vec::new();
    for (from, to) in [
        ("sdk/Cargo.toml", "wharf-sdk/Cargo.toml"),
        ("sdk/README.md", "wharf-sdk/README.md"),
        ("sdk-macros/Cargo.toml", "wharf-sdk-macros/Cargo.toml"),
    ] {
        rust.push((to.to_string(), root.join(from)));
    }
    collect(&root.join("sdk/src"), "wharf-sdk/src", &mut rust)?;
    collect(&root.join("sdk/wit"), "wharf-sdk/wit", &mut rust)?;
    collect(
        &root.join("sdk-macros/src"),
        "wharf-sdk-macros/src",
        &mut rust,
    )?;
    let mut python = vec![
        (
            "pyproject.toml".to_string(),
            root.join("sdk/python/pyproject.toml"),
        ),
        ("README.md".to_string(), root.join("sdk/python/README.md")),
    ];
    collect(&root.join("sdk/python/wharf_sdk"), "wharf_sdk", &mut python)?;
    let list = |name: &str, doc: &str, files: &[(String, PathBuf)]| {
        let mut code = format!("/// {doc}\npub static {name}: &[(&str, &str)] = &[\n");
        for (to, from) in files {
            code.push_str(&format!(
                "    ({to:?}, include_str!({:?})),\n",
                path_str(from)
            ));
        }
        code.push_str("];\n");
        code
    };
    let code = format!(
        "{}{}/// The workspace manifest the SDK crates inherit their fields from.\npub static WORKSPACE_MANIFEST: &str = include_str!({:?});\n",
        list(
            "RUST_SDK",
            "The Rust SDK crates (`wharf-sdk`, `wharf-sdk-macros`) with their WIT.",
            &rust
        ),
        list(
            "PYTHON_SDK",
            "The Python SDK package (`wharf-sdk`).",
            &python
        ),
        path_str(&root.join("Cargo.toml")),
    );
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    std::fs::write(out_dir.join("bundled_sdk.rs"), code).map_err(|e| e.to_string())
}

/// Adds every file under `dir` (following links, skipping caches) as `prefix/relative`.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "__pycache__" || name.ends_with(".pyc") || name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let relative = format!("{prefix}/{name}");
        if path.is_dir() {
            collect(&path, &relative, out)?;
        } else {
            out.push((relative, path));
        }
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir
        .parent()
        .ok_or("no workspace root")?
        .to_path_buf();
    for watched in [
        "plugins/Cargo.toml",
        "plugins/Cargo.lock",
        "sdk/src",
        "sdk/Cargo.toml",
        "sdk/wit",
        "sdk-macros/src",
        "sdk-macros/Cargo.toml",
        "wit",
    ] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
    for plugin in PLUGINS {
        println!(
            "cargo::rerun-if-changed={}",
            root.join("plugins").join(plugin).display()
        );
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    // Outside plugins/ so the build's own output does not retrigger this script.
    let target_dir = std::env::var("WHARF_PLUGINS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target").join("wasm-plugins"));
    let mut cmd = nested_cargo();
    cmd.arg("build")
        .arg("--release")
        .arg("--target=wasm32-wasip2")
        .arg("--manifest-path")
        .arg(root.join("plugins").join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    let status = cmd
        .status()
        .map_err(|e| format!("running cargo for the plugins: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the example plugins failed ({status}); is the target installed? `rustup target add wasm32-wasip2`"
        ));
    }
    let wasm_dir = target_dir.join("wasm32-wasip2").join("release");
    let mut code = String::from(
        "/// The bundled example backends: (name, component bytes).\npub static BUNDLED: &[(&str, &[u8])] = &[\n",
    );
    for plugin in PLUGINS {
        let file = wasm_dir.join(format!("{}.wasm", plugin.replace('-', "_")));
        let copied = out_dir.join(format!("{plugin}.wasm"));
        std::fs::copy(&file, &copied).map_err(|e| format!("copying {}: {e}", file.display()))?;
        code.push_str(&format!(
            "    ({plugin:?}, include_bytes!({:?})),\n",
            path_str(&copied)
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("bundled.rs"), code).map_err(|e| e.to_string())?;
    Ok(())
}

/// A cargo command for a nested build, without the outer build's flags and target.
fn nested_cargo() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_FEATURE_")
            || key.starts_with("CARGO_CFG_")
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Builds `wharf-sandboxd` statically (glibc's static CRT: the musl target is not
/// installable everywhere) for the target the host is built for, and embeds it as
/// `SANDBOX_AGENT`. On a target that is not Linux the agent is empty (sandboxes then run
/// without it).
fn embed_sandbox_agent() -> Result<(), String> {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir.parent().ok_or("no workspace root")?;
    for watched in [
        "sandboxd/src",
        "sandboxd/Cargo.toml",
        "sandboxd/Cargo.lock",
        "sandbox-protocol/src",
        "sandbox-protocol/Cargo.toml",
    ] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let target = std::env::var("TARGET").map_err(|e| e.to_string())?;
    let code = if target.ends_with("-linux-gnu") {
        let target_dir = root.join("target").join("sandboxd");
        let status = nested_cargo()
            .arg("build")
            .arg("--release")
            .arg("--locked")
            .arg(format!("--target={target}"))
            .arg("--manifest-path")
            .arg(root.join("sandboxd").join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
            .status()
            .map_err(|e| format!("running cargo for the sandbox agent: {e}"))?;
        if !status.success() {
            return Err(format!("building the sandbox agent failed ({status})"));
        }
        let binary = target_dir
            .join(&target)
            .join("release")
            .join("wharf-sandboxd");
        let copied = out_dir.join("wharf-sandboxd");
        std::fs::copy(&binary, &copied)
            .map_err(|e| format!("copying {}: {e}", binary.display()))?;
        format!(
            "/// The sandbox agent (`wharf-sandboxd`), a static binary for this host's target.\npub static SANDBOX_AGENT: &[u8] = include_bytes!({:?});\n",
            path_str(&copied)
        )
    } else {
        "/// No sandbox agent is built for this target.\npub static SANDBOX_AGENT: &[u8] = &[];\n"
            .to_string()
    };
    std::fs::write(out_dir.join("sandbox_agent.rs"), code).map_err(|e| e.to_string())
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

//! Builds the example backends in `plugins/` for wasm32-wasip2 and embeds them, so
//! `wharf serve` runs with no files beside the binary and the tests load real components.

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
];

fn main() {
    if let Err(e) = run() {
        println!("cargo::error={e}");
    }
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
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--target=wasm32-wasip2")
        .arg("--manifest-path")
        .arg(root.join("plugins").join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
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

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

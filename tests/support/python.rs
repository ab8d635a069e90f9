//! Python backends in the tests: the pinned toolchain (a venv with componentize-py and the
//! SDK, installed by `scripts/python-toolchain.sh`), the example `plugins/python-workbench`
//! and `wharf-py build` for other modules.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs a repository script that prints a path on stdout (its log goes to stderr).
fn script_path(script: &str) -> PathBuf {
    let out = Command::new(repo_root().join(script))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{script} does not run: {e}"));
    assert!(out.status.success(), "{script} failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The venv with the pinned toolchain, installed on first use.
pub fn toolchain() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| script_path("scripts/python-toolchain.sh"))
        .clone()
}

/// The venv holding the official MCP Python SDK (`scripts/mcp-sdk-venv.sh`), installed on
/// first use.
pub fn mcp_sdk() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| script_path("scripts/mcp-sdk-venv.sh"))
        .clone()
}

/// The example's `.wasm`, built by its own script (skipped when nothing changed).
pub fn workbench_wasm() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| script_path("plugins/python-workbench/build.sh"))
        .clone()
}

/// `wharf-py build MODULE -o OUT` with the pinned toolchain.
pub fn build_module(module: &Path, out: &Path) -> PathBuf {
    let build = Command::new(toolchain().join("bin/wharf-py"))
        .arg("build")
        .arg(module)
        .arg("-o")
        .arg(out)
        .arg("-q")
        .output()
        .expect("wharf-py runs");
    assert!(
        build.status.success(),
        "wharf-py build {} failed: {}",
        module.display(),
        String::from_utf8_lossy(&build.stderr)
    );
    out.to_path_buf()
}

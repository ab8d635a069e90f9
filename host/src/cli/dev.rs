//! `wharf dev [DIR]`: the author's loop. Builds the backend in DIR (a Rust crate for
//! wasm32-wasip2, or a Python backend's `app.py` with `wharf-py build`),
//! serves it on a loopback server, and rebuilds and hot-swaps it on every save (sessions
//! carry over). Dev mode grants what the backend declares (`requires`, plus loopback for
//! HTTP) and approves an upgrade that declares more, printing what it granted; each call
//! shows up as a `wharf::audit` log line.

use crate::Wharf;
use crate::config::{BackendConfig, ServerConfig};
use crate::front_door::Deployment;
use crate::server::{BoundServer, termination_signal};
use anyhow::{Context, Result, bail};
use notify::Watcher;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Quiet time after a save before rebuilding, so an editor's burst of writes is one build.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// What builds the backend being developed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// `cargo build --release --target wasm32-wasip2`.
    Cargo,
    /// `wharf-py build app.py` (the Python SDK's builder; `$WHARF_PY` names another).
    Python,
}

/// The backend being developed: its backend name and where its build puts the component.
#[derive(Debug, Clone, PartialEq)]
pub struct DevCrate {
    /// The crate (or Python project) directory.
    pub dir: PathBuf,
    /// The package name (a Python project's directory name), also the backend's name.
    pub name: String,
    /// The component the build makes.
    pub wasm: PathBuf,
    /// What builds it.
    pub toolchain: Toolchain,
}

impl DevCrate {
    /// Reads `DIR/Cargo.toml` (the component lands in `$CARGO_TARGET_DIR` or `DIR/target`),
    /// or, without one, a Python backend's `DIR/app.py` (the component lands in `DIR/build/`).
    pub fn read(dir: &Path, target_dir: Option<PathBuf>) -> Result<Self> {
        let manifest = dir.join("Cargo.toml");
        if !manifest.exists() && dir.join("app.py").is_file() {
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .context("the Python backend's directory has no usable name")?;
            crate::scaffold::validate_name(name)?;
            return Ok(Self {
                dir: dir.to_path_buf(),
                name: name.to_string(),
                wasm: dir.join("build").join(format!("{name}.wasm")),
                toolchain: Toolchain::Python,
            });
        }
        let text = std::fs::read_to_string(&manifest).with_context(|| {
            format!(
                "`{}` is neither a crate (no Cargo.toml) nor a Python backend (no app.py)",
                dir.display()
            )
        })?;
        let value: toml::Table = toml::from_str(&text)
            .with_context(|| format!("`{}` is not valid TOML", manifest.display()))?;
        let Some(name) = value
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
        else {
            bail!("`{}` has no [package] name", manifest.display());
        };
        crate::scaffold::validate_name(name)?;
        let target = target_dir.unwrap_or_else(|| dir.join("target"));
        Ok(Self {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            wasm: target.join(format!(
                "wasm32-wasip2/release/{}.wasm",
                name.replace('-', "_")
            )),
            toolchain: Toolchain::Cargo,
        })
    }
}

/// What dev mode grants a backend: what it declares, and loopback for its HTTP.
pub fn dev_config(wasm: &Path, requires: &crate::runtime::guest_types::Requires) -> BackendConfig {
    let mut config = BackendConfig::at(wasm.display().to_string());
    config.grants.images = requires.images.clone();
    config.grants.http_hosts = requires.http_hosts.clone();
    config.grants.networks = requires.networks.clone();
    config.grants.host_mounts = requires.host_mounts.clone();
    config.grants.http_private_cidrs = vec!["127.0.0.0/8".into(), "::1/128".into()];
    config.grants.granted_by = crate::policy::GrantedBy::Dev;
    config
}

/// Runs `wharf dev`: build, serve on `listen` (loopback only), rebuild on change.
pub async fn run(dir: PathBuf, listen: SocketAddr) -> Result<()> {
    if !listen.ip().is_loopback() {
        bail!("`wharf dev` serves on a loopback address only: it grants what the backend declares");
    }
    let dir = dir
        .canonicalize()
        .with_context(|| format!("`{}` does not exist", dir.display()))?;
    let krate = DevCrate::read(
        &dir,
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from),
    )?;
    let data_dir = krate
        .wasm
        .parent()
        .map_or_else(|| dir.join(".wharf-dev"), |p| p.join("wharf-dev"));
    let wharf = Wharf::new(ServerConfig {
        listen,
        data_dir,
        ..Default::default()
    })
    .await?;
    if build(&krate).await? {
        deploy(&wharf, &krate).await?;
    } else {
        bail!("the first build failed; fix it and run `wharf dev` again");
    }
    let server = BoundServer::bind(wharf.clone(), listen).await?;
    let addr = server.local_addr()?;
    eprintln!(
        "wharf dev: serving `{}` on http://{addr}; watching {} (calls are logged as wharf::audit)",
        krate.name,
        dir.display()
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let toolchain = krate.toolchain;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // A Python project's directory also holds the build's output: only sources count.
        let source = |e: &notify::Event| {
            toolchain == Toolchain::Cargo
                || e.paths
                    .iter()
                    .any(|p| p.extension().is_some_and(|x| x == "py"))
        };
        if event.is_ok_and(|e| !e.kind.is_access() && source(&e)) {
            let _ = tx.send(());
        }
    })?;
    match toolchain {
        Toolchain::Cargo => {
            watcher.watch(&dir.join("src"), notify::RecursiveMode::Recursive)?;
            watcher.watch(&dir.join("Cargo.toml"), notify::RecursiveMode::NonRecursive)?;
        }
        Toolchain::Python => watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?,
    }
    let rebuild = async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(DEBOUNCE).await;
            while rx.try_recv().is_ok() {}
            match build(&krate).await {
                Ok(true) => {
                    if let Err(e) = deploy(&wharf, &krate).await {
                        eprintln!("wharf dev: not loaded: {e:#}");
                    }
                }
                Ok(false) => {
                    eprintln!("wharf dev: the build failed; the running version keeps serving")
                }
                Err(e) => eprintln!("wharf dev: {e:#}"),
            }
        }
    };
    tokio::select! {
        served = server.serve(termination_signal()) => served,
        () = rebuild => Ok(()),
    }
}

/// `cargo build --release --target wasm32-wasip2` in the crate, or `wharf-py build app.py`
/// in a Python project; its output goes to the terminal. `false` when the build failed.
async fn build(krate: &DevCrate) -> Result<bool> {
    let dir = krate.dir.clone();
    eprintln!("wharf dev: building `{}`…", krate.name);
    let mut command = match krate.toolchain {
        Toolchain::Cargo => {
            let mut c = std::process::Command::new(
                std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            );
            c.args(["build", "--release", "--target", "wasm32-wasip2"]);
            c
        }
        Toolchain::Python => {
            if let Some(out) = krate.wasm.parent() {
                std::fs::create_dir_all(out)
                    .with_context(|| format!("creating {}", out.display()))?;
            }
            let mut c = std::process::Command::new(
                std::env::var_os("WHARF_PY").unwrap_or_else(|| "wharf-py".into()),
            );
            c.args(["build", "app.py", "-o"]).arg(&krate.wasm);
            c
        }
    };
    let tool = match krate.toolchain {
        Toolchain::Cargo => "cargo",
        Toolchain::Python => {
            "wharf-py: install the SDK in a venv and activate it (`pip install ./vendor/wharf-sdk` in a backend made by `wharf new --lang python`), or set WHARF_PY"
        }
    };
    let status = tokio::task::spawn_blocking(move || command.current_dir(&dir).status())
        .await?
        .with_context(|| format!("cannot run {tool}"))?;
    Ok(status.success())
}

/// Loads (or hot-swaps) the built component with the dev grants, approving an upgrade
/// that declares more.
async fn deploy(wharf: &Arc<Wharf>, krate: &DevCrate) -> Result<()> {
    let wasm = std::fs::read(&krate.wasm)
        .with_context(|| format!("the build made no `{}`", krate.wasm.display()))?;
    let description = wharf.inspect(wasm.clone()).await?;
    let requires = &description.requires;
    let config = dev_config(&krate.wasm, requires);
    let loaded = match wharf.deploy(&krate.name, Arc::new(wasm), config).await? {
        Deployment::Active(loaded) => *loaded,
        Deployment::Pending(_) => {
            eprintln!("wharf dev: the upgrade declares more (`requires`); approved in dev mode");
            wharf.approve_backend(&krate.name).await?
        }
    };
    let tools: Vec<String> = loaded
        .tools
        .iter()
        .map(|t| format!("{}:{}", krate.name, t.action))
        .collect();
    eprintln!(
        "wharf dev: loaded `{}` {} (tools: {}; granted what its `requires` declares: images {:?}, http_hosts {:?}, networks {:?}, host_mounts {:?}; plus HTTP to loopback. To reach more, declare it in `requires` and save)",
        krate.name,
        loaded.version,
        tools.join(", "),
        requires.images,
        requires.http_hosts,
        requires.networks,
        requires.host_mounts,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_names_the_backend_and_its_component() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"my-board\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        let krate = DevCrate::read(dir.path(), None).unwrap();
        assert_eq!(krate.name, "my-board");
        assert!(
            krate
                .wasm
                .ends_with("target/wasm32-wasip2/release/my_board.wasm")
        );
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"../x\"\n",
        )
        .unwrap();
        assert!(DevCrate::read(dir.path(), None).is_err());
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        assert!(DevCrate::read(dir.path(), None).is_err());
    }

    #[test]
    fn a_directory_with_app_py_and_no_crate_is_a_python_backend() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("tracker-py");
        std::fs::create_dir(&dir).unwrap();
        assert!(
            DevCrate::read(&dir, None).is_err(),
            "neither crate nor app.py"
        );
        std::fs::write(dir.join("app.py"), "").unwrap();
        let project = DevCrate::read(&dir, None).unwrap();
        assert_eq!(project.toolchain, Toolchain::Python);
        assert_eq!(project.name, "tracker-py");
        assert_eq!(project.wasm, dir.join("build/tracker-py.wasm"));
        let bad = parent.path().join("Bad Name");
        std::fs::create_dir(&bad).unwrap();
        std::fs::write(bad.join("app.py"), "").unwrap();
        assert!(DevCrate::read(&bad, None).is_err(), "the name is checked");
    }
}

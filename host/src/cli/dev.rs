//! `wharf dev [DIR]`: the author's loop. Builds the backend crate in DIR for wasm32-wasip2,
//! serves it on a loopback server, and rebuilds and hot-swaps it on every save (sessions
//! carry over). Dev mode grants what the backend declares (`requires`, plus loopback for
//! HTTP) and approves an upgrade that declares more, printing what it granted; each call
//! shows up as a `wharf::audit` log line.

use crate::Wharf;
use crate::config::{BackendConfig, ServerConfig};
use crate::front_door::Deployed;
use crate::server::{BoundServer, termination_signal};
use anyhow::{Context, Result, bail};
use notify::Watcher;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Quiet time after a save before rebuilding, so an editor's burst of writes is one build.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// The crate being developed: its backend name and where cargo puts its component.
#[derive(Debug, Clone, PartialEq)]
pub struct DevCrate {
    /// The crate directory.
    pub dir: PathBuf,
    /// The package name, also the backend's name.
    pub name: String,
    /// The component cargo builds.
    pub wasm: PathBuf,
}

impl DevCrate {
    /// Reads `DIR/Cargo.toml`; the component lands in `$CARGO_TARGET_DIR` (or `DIR/target`).
    pub fn read(dir: &Path, target_dir: Option<PathBuf>) -> Result<Self> {
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .with_context(|| format!("`{}` is not a crate (no Cargo.toml)", dir.display()))?;
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
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access()) {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir.join("src"), notify::RecursiveMode::Recursive)?;
    watcher.watch(&dir.join("Cargo.toml"), notify::RecursiveMode::NonRecursive)?;
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

/// `cargo build --release --target wasm32-wasip2` in the crate; its output goes to the
/// terminal. `false` when the build failed.
async fn build(krate: &DevCrate) -> Result<bool> {
    let dir = krate.dir.clone();
    eprintln!("wharf dev: building `{}`…", krate.name);
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .current_dir(&dir)
            .status()
    })
    .await?
    .context("cannot run cargo")?;
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
        Deployed::Active(loaded) => loaded,
        Deployed::Pending(_) => {
            eprintln!("wharf dev: the upgrade declares more (`requires`); approved in dev mode");
            wharf.approve_backend(&krate.name).await?
        }
    };
    let tools: Vec<String> = loaded
        .description
        .tools
        .iter()
        .map(|t| format!("{}:{}", krate.name, t.action))
        .collect();
    eprintln!(
        "wharf dev: loaded `{}` {} (tools: {}; granted: images {:?}, http_hosts {:?} + loopback, networks {:?}, host_mounts {:?})",
        krate.name,
        loaded.description.version,
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
}

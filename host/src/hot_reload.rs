//! `wharf serve --plugins DIR`: the directory is the set of hot-loaded backends.
//! `NAME.wasm` (with an optional `NAME.toml` holding the keys of a `[backends.NAME]` table:
//! grants, limits, config, sessions, sha256) is loaded as `NAME`; changing either file
//! replaces it; deleting the `.wasm` unloads it. Files present at start are loaded before
//! [`watch`] returns. Events are debounced (200 ms of quiet) so a file being written is read
//! once it is complete; write to a temporary name and rename for an atomic drop.
//!
//! Every load goes through [`Wharf::deploy`]: compiled off the request path, refused (with
//! the reason in `/v1/backends`) when bad while the running version keeps serving, held as
//! pending when it declares more capabilities than the running version.
//!
//! A `NAME.toml` without a `NAME.wasm` whose `path` is an `oci://` reference is pulled from
//! its registry (ARCHITECTURE.md, "Backends from OCI registries"); deleting the `.toml`
//! unloads it.

use crate::Wharf;
use crate::capped_file::{self, Links};
use crate::config::BackendConfig;
use crate::front_door::Deployment;
use anyhow::{Context, Result};
use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// Quiet time after the last event before the directory is acted on.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// A running watcher; dropping it stops watching (loaded backends stay loaded).
pub struct PluginsWatcher {
    task: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

impl PluginsWatcher {
    /// The watched directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PluginsWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What was last deployed from the directory under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Applied {
    sha256: String,
    sidecar: Option<String>,
}

struct DirState {
    dir: PathBuf,
    applied: BTreeMap<String, Applied>,
}

/// Loads every `NAME.wasm` in `dir` (created if missing), then watches it.
pub async fn watch(wharf: Arc<Wharf>, dir: PathBuf) -> Result<PluginsWatcher> {
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let (tx, rx) = unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        let _ = tx.send(event);
    })
    .context("starting the file watcher")?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .with_context(|| format!("watching {}", dir.display()))?;
    let mut state = DirState {
        dir: dir.clone(),
        applied: BTreeMap::new(),
    };
    for name in state.names_on_disk() {
        state.sync(&wharf, &name).await;
    }
    tracing::info!(dir = %dir.display(), backends = state.applied.len(), "watching the plugins directory");
    let weak = Arc::downgrade(&wharf);
    let task = tokio::spawn(run(weak, watcher, rx, state));
    Ok(PluginsWatcher { task, dir })
}

async fn run(
    wharf: Weak<Wharf>,
    _watcher: notify::RecommendedWatcher,
    mut events: UnboundedReceiver<notify::Result<Event>>,
    mut state: DirState,
) {
    loop {
        let Some(first) = events.recv().await else {
            return;
        };
        let mut names = BTreeSet::new();
        let mut rescan = state.collect(first, &mut names);
        loop {
            match tokio::time::timeout(DEBOUNCE, events.recv()).await {
                Ok(Some(event)) => rescan |= state.collect(event, &mut names),
                Ok(None) => return,
                Err(_) => break,
            }
        }
        if rescan {
            names.extend(state.names_on_disk());
            names.extend(state.applied.keys().cloned());
        }
        let Some(wharf) = wharf.upgrade() else {
            return;
        };
        for name in names {
            state.sync(&wharf, &name).await;
        }
    }
}

fn is_not_found(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

fn not_plain(file: &str) -> String {
    format!(
        "{file} is a symbolic link or not a regular file: refused (put the file itself in the plugins directory)"
    )
}

// Files of the plugins directory are read with `Links::Refuse`: a symbolic link there could
// point anywhere on the host.

/// The largest `NAME.toml` sidecar read, bytes.
const MAX_SIDECAR_BYTES: u64 = 1 << 20;

/// The largest `NAME.wasm` read, bytes (the same bound as a component pulled from OCI).
const MAX_WASM_BYTES: u64 = crate::bounded::MAX_COMPONENT_BYTES;

/// Why a sidecar was refused, as readers of `/v1/backends` see it: the line of a TOML
/// error and its kind, never the file's text (a TOML error's own message quotes it).
fn sidecar_problem(name: &str, text: &str, err: &anyhow::Error) -> String {
    let toml_error = err
        .chain()
        .find_map(|cause| cause.downcast_ref::<toml::de::Error>());
    match toml_error {
        Some(e) => {
            let line = e.span().map_or(String::new(), |span| {
                let before = text.as_bytes().get(..span.start).unwrap_or_default();
                let line = before.iter().filter(|b| **b == b'\n').count() + 1;
                format!(" at line {line}")
            });
            format!("{name}.toml is not a valid backend table{line}")
        }
        None => format!("in {name}.toml: {err}"),
    }
}

impl DirState {
    /// Names with a `.wasm` or a `.toml` in the directory.
    fn names_on_disk(&self) -> BTreeSet<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return BTreeSet::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let ext = path.extension()?;
                (ext == "wasm" || ext == "toml").then_some(())?;
                Some(path.file_stem()?.to_str()?.to_string())
            })
            .collect()
    }

    /// Adds the names an event touches; true when the watcher lost events (rescan all).
    fn collect(&self, event: notify::Result<Event>, names: &mut BTreeSet<String>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!("plugins directory watcher: {e}; rescanning");
                return true;
            }
        };
        if event.need_rescan() {
            return true;
        }
        match event.kind {
            // Reads (ours included) change nothing; a closed write does.
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            EventKind::Access(_) => return false,
            _ => {}
        }
        for path in event.paths {
            if path.parent() != Some(self.dir.as_path()) {
                continue;
            }
            let is_ours = path
                .extension()
                .is_some_and(|ext| ext == "wasm" || ext == "toml");
            if let (true, Some(stem)) = (is_ours, path.file_stem().and_then(|s| s.to_str())) {
                names.insert(stem.to_string());
            }
        }
        false
    }

    /// A `NAME.toml` alone naming an `oci://` path: pulls and deploys it when the sidecar
    /// changed. False when there is no such sidecar (the caller unloads).
    async fn sync_reference(&mut self, wharf: &Wharf, name: &str) -> bool {
        let Ok(bytes) = capped_file::read(
            self.dir.join(format!("{name}.toml")),
            MAX_SIDECAR_BYTES,
            Links::Refuse,
        )
        .await
        else {
            return false;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return false;
        };
        let config = match BackendConfig::from_sidecar(&text, "", |v| std::env::var(v).ok()) {
            Ok(config) if config.is_oci() => config,
            Ok(_) => return false,
            // A broken sidecar left behind by a deleted `.wasm` must not keep that backend
            // loaded: only one that meant to name a reference holds the name.
            Err(_) if !text.contains(crate::config::OCI_PREFIX) => return false,
            Err(e) => {
                tracing::debug!(backend = name, "{name}.toml refused: {e:#}");
                wharf.record_rejection(name, String::new(), sidecar_problem(name, &text, &e));
                return true;
            }
        };
        let applied = Applied {
            sha256: String::new(),
            sidecar: Some(text),
        };
        if self.applied.get(name) == Some(&applied) {
            return true;
        }
        if !config.enabled {
            if self.applied.remove(name).is_some() && wharf.unload_backend(name).await.is_ok() {
                tracing::info!(backend = name, "disabled in {name}.toml: backend unloaded");
            }
            return true;
        }
        match wharf.deploy_reference(name, config).await {
            Ok(_) => {
                tracing::info!(
                    backend = name,
                    "loaded from its registry (plugins directory)"
                );
                self.applied.insert(name.to_string(), applied);
            }
            Err(e) => tracing::debug!(backend = name, "not loaded: {}", e.message),
        }
        true
    }

    /// Brings `name` in line with the directory: load, replace, or unload.
    async fn sync(&mut self, wharf: &Wharf, name: &str) {
        let wasm_path = self.dir.join(format!("{name}.wasm"));
        let wasm = match capped_file::read(wasm_path.clone(), MAX_WASM_BYTES, Links::Refuse).await {
            Ok(wasm) => wasm,
            Err(e) if capped_file::is_not_plain(&e) => {
                wharf.record_rejection(name, String::new(), not_plain(&format!("{name}.wasm")));
                return;
            }
            Err(e) if is_not_found(&e) => {
                if self.sync_reference(wharf, name).await {
                    return;
                }
                if self.applied.remove(name).is_some() {
                    match wharf.unload_backend(name).await {
                        Ok(_) => tracing::info!(backend = name, "file removed: backend unloaded"),
                        Err(e) => tracing::warn!(backend = name, "unloading failed: {}", e.message),
                    }
                }
                return;
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                wharf.record_rejection(name, String::new(), format!("reading {name}.wasm: {e}"));
                return;
            }
            Err(e) => {
                tracing::warn!(backend = name, "reading {}: {e}", wasm_path.display());
                return;
            }
        };
        let sha256 = hex::encode(Sha256::digest(&wasm));
        let sidecar = match capped_file::read(
            self.dir.join(format!("{name}.toml")),
            MAX_SIDECAR_BYTES,
            Links::Refuse,
        )
        .await
        {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Some(text),
                Err(_) => {
                    let reason = format!("{name}.toml is not UTF-8 text");
                    wharf.record_rejection(name, sha256, reason);
                    return;
                }
            },
            Err(e) if is_not_found(&e) => None,
            Err(e) if capped_file::is_not_plain(&e) => {
                wharf.record_rejection(name, sha256, not_plain(&format!("{name}.toml")));
                return;
            }
            Err(e) => {
                wharf.record_rejection(name, sha256, format!("reading {name}.toml: {e}"));
                return;
            }
        };
        let applied = Applied {
            sha256: sha256.clone(),
            sidecar: sidecar.clone(),
        };
        if self.applied.get(name) == Some(&applied) {
            return;
        }
        let path = wasm_path.to_string_lossy().into_owned();
        let config = match &sidecar {
            Some(text) => match BackendConfig::from_sidecar(text, &path, |v| std::env::var(v).ok())
            {
                Ok(config) => config,
                Err(e) => {
                    // Readers see the reason: it names the line, never the file's text.
                    tracing::debug!(backend = name, "{name}.toml refused: {e:#}");
                    wharf.record_rejection(name, sha256, sidecar_problem(name, text, &e));
                    return;
                }
            },
            None => BackendConfig::at(path),
        };
        if config.is_oci() {
            let reason = format!(
                "{name}.toml names an oci:// path and {name}.wasm exists too: keep one of them"
            );
            wharf.record_rejection(name, sha256, reason);
            return;
        }
        if !config.enabled {
            if self.applied.remove(name).is_some() && wharf.unload_backend(name).await.is_ok() {
                tracing::info!(backend = name, "disabled in {name}.toml: backend unloaded");
            }
            return;
        }
        match wharf.deploy(name, Arc::new(wasm), config).await {
            Ok(Deployment::Active(backend)) => {
                tracing::info!(backend = name, version = %backend.version, "loaded from the plugins directory");
                self.applied.insert(name.to_string(), applied);
            }
            Ok(Deployment::Pending(pending)) => {
                tracing::warn!(backend = name, version = %pending.version, "upgrade from the plugins directory waits for approval");
                self.applied.insert(name.to_string(), applied);
            }
            // Already recorded for /v1/backends; a later change of the file retries.
            Err(e) => tracing::debug!(backend = name, "not loaded: {}", e.message),
        }
    }
}

//! Loading, replacing and unloading backends while the host serves: compile and warm the
//! new version off to the side, swap it in atomically (new calls go to it at once; calls
//! in flight finish on the old one, which holds its own `Arc`), then drain the old one
//! (its instances get `shutdown`) within a deadline. An upgrade that declares more
//! capabilities than the running version, or whose operator's grants reach further than
//! the running version's, waits for an admin's approval; a component that
//! cannot be loaded is refused and the running version keeps serving, with the reason kept
//! for `/v1/backends`. The front door re-checks the backend's sessions after a swap.

use super::lifecycle::{Deployed, Pending, PendingUpgrade};
use super::{BackendEntry, BackendRegistry};
use crate::clock::now_ms;
use crate::config::{BackendConfig, toml_to_json};
use crate::error_code::WharfError;
use crate::metrics::BackendEvent;
use crate::policy::grants_beyond;
use crate::requires::requires_beyond;
use crate::runtime::backend::Backend;
use crate::runtime::backend_description::CompiledPre;
use crate::runtime::instance_pool::PoolSettings;
use crate::runtime::loaded_backend::{self, BackendParts, LoadedBackend};
use crate::runtime::provider_component::ProviderComponent;
use crate::runtime::resource_component::ResourceComponent;
use crate::sandbox_toolset::ProviderBackend;
use crate::sandbox_toolset::warm_pool::WarmSetup;
use anyhow::{Result, anyhow};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits until nobody but the caller holds `backend` (calls in flight hold it) or the
/// deadline passes, then drains it: idle instances get `shutdown`, and instances still out
/// are shut down when they come back.
async fn drain_when_released(backend: Arc<LoadedBackend>) {
    let settings = &backend.settings;
    let deadline = Instant::now() + settings.hook_timeout + settings.queue_timeout;
    while Arc::strong_count(&backend) > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if Arc::strong_count(&backend) > 1 {
        tracing::warn!(backend = %backend.name, "calls still hold the old version after the drain deadline; draining anyway");
    }
    backend.drain().await;
    tracing::info!(backend = %backend.name, version = %backend.description.version, "old version drained");
}

fn drain_in_background(backend: Arc<LoadedBackend>) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(drain_when_released(backend));
    }
}

/// A swap the front door re-checks the backend's sessions after (with the new version's
/// `discover`).
#[derive(Debug, Clone)]
pub struct Swapped {
    /// The version the swap replaced; `None` for a first load.
    pub previous: Option<String>,
}

/// One deployment at a time: held across a load and the session check after it.
pub struct DeployTurn<'a> {
    _guard: tokio::sync::MutexGuard<'a, ()>,
}

impl BackendRegistry {
    /// Waits for this host's turn to deploy.
    pub async fn deploy_turn(&self) -> DeployTurn<'_> {
        DeployTurn {
            _guard: self.lifecycle.deploys.lock().await,
        }
    }

    /// Compiles, describes and warms a component without registering it.
    async fn prepare(
        &self,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: &BackendConfig,
    ) -> Result<Arc<LoadedBackend>> {
        anyhow::ensure!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "backend name `{name}` must be letters, digits, `-` or `_`"
        );
        config.check_sha256(&wasm)?;
        let compiled =
            loaded_backend::compile(self.engine.engine(), &self.linker, &self.cache, wasm).await?;
        let cache = match compiled.cache {
            crate::runtime::compile_cache::CacheOutcome::Hit => "hit",
            crate::runtime::compile_cache::CacheOutcome::Compiled => "compiled",
            crate::runtime::compile_cache::CacheOutcome::Rebuilt => "rebuilt",
        };
        self.parts
            .metrics
            .record_compile(name, cache, compiled.compile_time);
        let limits = &config.limits;
        let memory_limit =
            (limits.memory_mb << 20).min(crate::runtime::engine::MAX_MEMORY_BYTES) as usize;
        let settings = PoolSettings {
            min: limits.pool_min,
            max: limits.pool_max,
            retire_after_calls: limits.retire_after_calls.max(1),
            memory_high_water_bytes: ((limits.memory_high_water_mb << 20) as usize)
                .min(memory_limit),
            memory_limit_bytes: memory_limit,
            queue_timeout: Duration::from_millis(limits.queue_timeout_ms),
            hook_timeout: Duration::from_millis(
                limits
                    .call_timeout_ms
                    .unwrap_or(self.default_call_timeout_ms),
            ),
        };
        let warmup_config = config
            .config
            .as_ref()
            .map(toml_to_json)
            .unwrap_or(Value::Null);
        let grants = Arc::new(config.grants.clone());
        let granted = crate::policy::granted_levels(&grants.isolation)
            .map_err(|d| anyhow!("backend `{name}`: {d}"))?;
        let offered = self.parts.services.containers.isolation_levels();
        let isolation = granted
            .into_iter()
            .filter(|level| offered.contains(level))
            .collect();
        let name: Arc<str> = Arc::from(name);
        let mut description = compiled.description;
        let on_idle = config.sessions.on_idle.as_str();
        if config.sessions.on_idle != crate::config::OnIdle::Destroy
            && matches!(compiled.pre, CompiledPre::Resource(_))
        {
            anyhow::bail!(
                "backend `{name}` has [backends.{name}.sessions] on_idle = \"{on_idle}\", but it is not a sandbox provider: there is no sandbox to {on_idle}"
            );
        }
        let behaviour: Box<dyn Backend> = match compiled.pre {
            CompiledPre::Resource(pre) => Box::new(
                ResourceComponent::start(
                    name.clone(),
                    pre,
                    settings.clone(),
                    &warmup_config,
                    grants,
                    self.parts.services.clone(),
                )
                .await?,
            ),
            CompiledPre::Provider(pre) => {
                ProviderBackend::describe(&mut description);
                // A pool creates sandboxes before any session asks; only a provider that
                // says its sandboxes may be made ahead gets one.
                if config.warm_pool.as_ref().is_some_and(|p| p.size > 0)
                    && !description.features.poolable
                {
                    anyhow::bail!(
                        "backend `{name}` has a [backends.{name}.warm_pool], but its provider does not declare its sandboxes `poolable` (provider-features, contract 0.2.0): remove the warm pool or declare the feature"
                    );
                }
                // Pausing or archiving needs a provider that can pause and snapshot.
                if (config.sessions.on_idle != crate::config::OnIdle::Destroy
                    || config.sessions.on_paused_ttl != crate::config::OnPausedTtl::Destroy)
                    && !description.features.suspension
                {
                    anyhow::bail!(
                        "backend `{name}` has [backends.{name}.sessions] on_idle = \"{on_idle}\", but its provider cannot pause or snapshot its sandboxes (feature `suspension`, contract 0.3.0): use on_idle = \"destroy\""
                    );
                }
                let provider = ProviderComponent::start(
                    name.clone(),
                    pre,
                    description.features,
                    settings.clone(),
                    &warmup_config,
                    grants,
                    self.parts.services.clone(),
                )
                .await?;
                let warm = config.warm_pool.as_ref().map(|pool| WarmSetup {
                    config: pool.clone(),
                    store: self.parts.store.clone(),
                    node: self.parts.node_id.clone(),
                    metrics: self.parts.metrics.clone(),
                    max_lifetime_seconds: config.sessions.max_lifetime_seconds,
                });
                Box::new(ProviderBackend::with_warm_pool(provider, warm)?)
            }
        };
        if description.contract.deprecated() {
            tracing::warn!(
                backend = &*name,
                contract = %description.contract,
                current = %crate::runtime::world::ContractVersion::CURRENT,
                "the backend was built against an older contract; it is served through adapters, rebuild it against the current one"
            );
        }
        let parts = BackendParts {
            name,
            description,
            settings,
            config: warmup_config,
            cache: compiled.cache,
            compile_time: compiled.compile_time,
            isolation,
            tool_settings: config.tools.clone(),
        };
        Ok(Arc::new(LoadedBackend::new(parts, behaviour).await?))
    }

    /// Puts `loaded` in the table (new calls use it from now on) and drains the version it
    /// replaced in the background. Returns the replaced version's version string.
    fn activate(
        &self,
        name: &str,
        loaded: Arc<LoadedBackend>,
        config: BackendConfig,
    ) -> Result<Option<String>> {
        let previous = self
            .backends
            .write()
            .map_err(|_| anyhow!("backend table lock poisoned"))?
            .insert(
                name.to_string(),
                BackendEntry {
                    loaded: loaded.clone(),
                    config,
                },
            );
        self.rebuild_tool_index();
        let superseded = self.lifecycle.with(|s| {
            s.unloaded.remove(name);
            s.errors.remove(name);
            s.pending.remove(name)
        });
        if let Some(Some(pending)) = superseded
            && !Arc::ptr_eq(&pending.loaded, &loaded)
        {
            drain_in_background(pending.loaded);
        }
        tracing::info!(
            backend = name,
            version = %loaded.description.version,
            tools = loaded.tools().tools().len(),
            cache = ?loaded.cache,
            compile_ms = loaded.compile_time.as_millis() as u64,
            replaced = previous.is_some(),
            "backend loaded"
        );
        self.parts.metrics.record_event(name, BackendEvent::Load);
        Ok(previous.map(|p| {
            let version = p.loaded.description.version.clone();
            drain_in_background(p.loaded);
            version
        }))
    }

    /// Loads or replaces `name` in `_turn`; with `check_permissions`, an upgrade that
    /// declares more than the running version, or whose grants reach beyond the running
    /// config's, is held as pending. A refusal is recorded
    /// for `/v1/backends` and leaves the running version serving. `Some(Swapped)` when the
    /// backend's sessions want re-checking (an upgrade, or an operator's hot load).
    pub async fn install(
        &self,
        _turn: &DeployTurn<'_>,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: BackendConfig,
        check_permissions: bool,
    ) -> Result<(Deployed, Option<Swapped>)> {
        let sha256 = hex::encode(Sha256::digest(wasm.as_slice()));
        let loaded = match self.prepare(name, wasm, &config).await {
            Ok(loaded) => loaded,
            Err(e) => {
                self.record_rejection(name, sha256, format!("{e:#}"));
                return Err(e.context(format!("backend `{name}` was not loaded")));
            }
        };
        let current = self.backend(name).ok();
        if check_permissions && let Some(current) = &current {
            let added =
                requires_beyond(&loaded.description.requires, &current.description.requires);
            // Against the default grants (no list entries) when the running config cannot
            // be read: any widening is held, not waved through.
            let running = self
                .backend_config(name)
                .map(|running| running.grants)
                .unwrap_or_default();
            let grants_added = grants_beyond(&config.grants, &running);
            if !added.is_empty() || !grants_added.is_empty() {
                let d = &loaded.description;
                let view = PendingUpgrade {
                    version: d.version.clone(),
                    declared_name: d.declared_name.clone(),
                    sha256: d.sha256.clone(),
                    added,
                    requires: d.requires.clone(),
                    grants_added,
                    since_ms: now_ms(),
                };
                tracing::warn!(backend = name, version = %view.version, added = ?view.added, grants_added = ?view.grants_added, "upgrade declares more capabilities or is granted more; waiting for approval");
                let pending = Pending {
                    loaded,
                    config,
                    view: view.clone(),
                };
                let replaced = self.lifecycle.with(|s| {
                    s.errors.remove(name);
                    s.pending.insert(name.to_string(), pending)
                });
                if let Some(Some(old)) = replaced {
                    drain_in_background(old.loaded);
                }
                return Ok((Deployed::Pending(Box::new(view)), None));
            }
        }
        let upgrade = current.is_some();
        drop(current);
        let previous = self.activate(name, loaded.clone(), config)?;
        let swapped = (upgrade || check_permissions).then_some(Swapped { previous });
        Ok((Deployed::Active(loaded), swapped))
    }

    /// Activates the upgrade of `name` that waits for approval.
    pub async fn approve(
        &self,
        _turn: &DeployTurn<'_>,
        name: &str,
    ) -> Result<(Arc<LoadedBackend>, Swapped), WharfError> {
        let pending = self.take_pending(name)?;
        tracing::info!(backend = name, version = %pending.view.version, "upgrade approved");
        let previous = self
            .activate(name, pending.loaded.clone(), pending.config)
            .map_err(|e| WharfError::internal(format!("{e:#}")))?;
        Ok((pending.loaded, Swapped { previous }))
    }

    /// Takes the upgrade of `name` that waits for approval off the list.
    fn take_pending(&self, name: &str) -> Result<super::lifecycle::Pending, WharfError> {
        self.lifecycle
            .with(|s| s.pending.remove(name))
            .flatten()
            .ok_or_else(|| {
                WharfError::invalid_request(format!(
                    "no upgrade of `{name}` is waiting for approval"
                ))
            })
    }

    /// Drops the upgrade of `name` that waits for approval (drained in the background);
    /// the running version keeps serving.
    pub async fn reject(
        &self,
        _turn: &DeployTurn<'_>,
        name: &str,
    ) -> Result<PendingUpgrade, WharfError> {
        let pending = self.take_pending(name)?;
        tracing::info!(backend = name, version = %pending.view.version, "upgrade rejected");
        drain_in_background(pending.loaded);
        Ok(pending.view)
    }

    /// Unloads a backend (and any upgrade of it waiting for approval): new calls answer
    /// 5011 at once; returns after the calls in flight finished (or the deadline passed)
    /// and the old instances got `shutdown`.
    pub async fn unload(&self, name: &str) -> Result<bool, WharfError> {
        let removed = {
            let _one_at_a_time = self.deploy_turn().await;
            let removed = self
                .backends
                .write()
                .map_err(|_| WharfError::internal("backend table lock poisoned"))?
                .remove(name);
            self.rebuild_tool_index();
            let pending = self.lifecycle.with(|s| {
                if removed.is_some() {
                    s.unloaded.insert(name.to_string());
                }
                s.pending.remove(name)
            });
            if let Some(Some(pending)) = pending {
                drain_in_background(pending.loaded);
            }
            removed
        };
        match removed {
            Some(entry) => {
                tracing::info!(backend = name, "unloading: draining");
                self.parts.metrics.record_event(name, BackendEvent::Unload);
                drain_when_released(entry.loaded).await;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

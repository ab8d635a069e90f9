//! A backend as loaded: what it says about itself (see
//! [`backend_description`](crate::runtime::backend_description)), the validators of its
//! tools' argument schemas, its pool settings, and its behaviour behind the [`Backend`]
//! face. [`compile`] turns bytes into a described component of either world and any
//! served contract version.

use crate::error_code::WharfError;
use crate::runtime::backend::{Backend, ToolCall};
use crate::runtime::backend_description::{BackendDescription, CompiledPre, describe};
use crate::runtime::compile_cache::{CacheOutcome, CompileCache};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::PoolSettings;
use crate::runtime::provider_guest::ProviderPre;
use crate::runtime::resource_guest::ResourcePre;
use crate::runtime::tool_table::{ToolPoll, ToolTable, listing_digest};
use crate::runtime::world::{self, WorldKind};
use crate::tool::{ToolDescription, ToolResult};
use crate::tool_filter::ToolFilter;
use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wasmtime::component::Linker;

/// A compiled, described component, before its pool exists.
pub struct CompiledBackend {
    /// The pre-instantiated component.
    pub pre: CompiledPre,
    /// What it says about itself.
    pub description: BackendDescription,
    /// Whether the compile cache served it.
    pub cache: CacheOutcome,
    /// Compile (or cache load) time.
    pub compile_time: Duration,
}

/// Compiles (or loads from cache), links and describes a component. Compilation runs on a
/// blocking thread, off the async workers.
pub async fn compile(
    engine: &Engine,
    linker: &Linker<HostState>,
    cache: &CompileCache,
    wasm: Arc<Vec<u8>>,
) -> Result<CompiledBackend> {
    let started = Instant::now();
    let sha256 = hex::encode(Sha256::digest(wasm.as_slice()));
    let (component, outcome) = {
        let (engine, cache, wasm) = (engine.clone(), cache.clone(), wasm.clone());
        tokio::task::spawn_blocking(move || cache.load_or_compile(&engine, &wasm))
            .await
            .context("the compile task failed")??
    };
    let compile_time = started.elapsed();
    let target = world::detect(engine, &component)?;
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(anyhow::Error::from)
        .context("the component's imports cannot be satisfied")?;
    let pre = match target.kind {
        WorldKind::ResourceBackend => {
            CompiledPre::Resource(ResourcePre::new(target.version, instance_pre)?)
        }
        WorldKind::SandboxProvider => {
            CompiledPre::Provider(ProviderPre::new(target.version, instance_pre)?)
        }
    };
    let description = describe(&pre, target, sha256).await?;
    Ok(CompiledBackend {
        pre,
        description,
        cache: outcome,
        compile_time,
    })
}

/// A loaded backend: description, validators, settings and behaviour.
pub struct LoadedBackend {
    /// The operator's name for it.
    pub name: Arc<str>,
    /// What it says about itself (with the toolset's tools, for a provider).
    pub description: BackendDescription,
    /// Its pool's settings.
    pub settings: PoolSettings,
    /// The operator config given to warmup.
    pub config: Value,
    /// Whether the compile cache served it at load.
    pub cache: CacheOutcome,
    /// Compile (or cache load) time.
    pub compile_time: Duration,
    /// The isolation levels its containers can run at: granted, and offered by the engine.
    pub isolation: Vec<crate::policy::Isolation>,
    table: RwLock<Arc<ToolTable>>,
    filter: ToolFilter,
    poll: Option<ToolPoll>,
    behaviour: Box<dyn Backend>,
}

impl std::fmt::Debug for LoadedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedBackend")
            .field("name", &self.name)
            .field("version", &self.description.version)
            .finish()
    }
}

/// Everything about a backend except its behaviour, to build a [`LoadedBackend`].
pub struct BackendParts {
    /// The operator's name.
    pub name: Arc<str>,
    /// Its description (tools included).
    pub description: BackendDescription,
    /// Pool settings.
    pub settings: PoolSettings,
    /// Operator config.
    pub config: Value,
    /// Cache outcome at load.
    pub cache: CacheOutcome,
    /// Compile time.
    pub compile_time: Duration,
    /// Isolation levels granted and offered.
    pub isolation: Vec<crate::policy::Isolation>,
    /// The operator's tool patterns and listing interval.
    pub tool_settings: crate::config::ToolSettings,
}

impl LoadedBackend {
    /// A backend from its parts and its behaviour; refuses `describe` tools with an invalid
    /// input schema or a name used twice. A backend whose guest lists its tools (contract
    /// 0.3.0's `tool-listing`, [`BackendDescription::lists_tools`]) is asked once here,
    /// after warmup, serves that list, and is asked again every `tools.poll_seconds`; when
    /// this first listing fails it serves `describe`'s tools until one succeeds.
    pub async fn new(parts: BackendParts, behaviour: Box<dyn Backend>) -> Result<Self> {
        let filter = parts.tool_settings.filter();
        let mut table = ToolTable::described(&parts.description.tools, &filter)?;
        let mut poll = None;
        let every = Duration::from_secs(parts.tool_settings.poll_seconds.max(1));
        let listed = if parts.description.lists_tools {
            behaviour.list_tools().await
        } else {
            Ok(None)
        };
        match listed {
            Ok(None) => {}
            Ok(Some(listed)) => {
                let watch = ToolPoll::new(every);
                watch.changed(listing_digest(&listed));
                let (listed_table, dropped) = list_off_thread(listed, filter.clone()).await?;
                report_dropped(&parts.name, &dropped);
                table = listed_table;
                poll = Some(watch);
            }
            Err(e) => {
                tracing::warn!(
                    backend = &*parts.name,
                    "listing its tools failed; serving the tools it describes until a listing succeeds: {}",
                    e.message
                );
                poll = Some(ToolPoll::new(every));
            }
        }
        Ok(Self {
            name: parts.name,
            description: parts.description,
            settings: parts.settings,
            config: parts.config,
            cache: parts.cache,
            compile_time: parts.compile_time,
            isolation: parts.isolation,
            table: RwLock::new(Arc::new(table)),
            filter,
            poll,
            behaviour,
        })
    }

    /// The tools served now (after the operator's patterns; for a backend that lists its
    /// tools, its latest accepted listing).
    pub fn tools(&self) -> Arc<ToolTable> {
        self.table.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// Whether the guest lists its tools at run time (and is asked again on an interval).
    pub fn poll(&self) -> Option<&ToolPoll> {
        self.poll.as_ref()
    }

    /// Asks a backend that lists its tools for them and serves the answer: true when the
    /// served tools changed. An unchanged answer costs no checks; a failed one keeps the
    /// tools served.
    pub async fn refresh_tools(&self) -> Result<bool, WharfError> {
        let Some(poll) = &self.poll else {
            return Ok(false);
        };
        let Some(listed) = self.behaviour.list_tools().await? else {
            return Ok(false);
        };
        if !poll.changed(listing_digest(&listed)) {
            return Ok(false);
        }
        let (table, dropped) = list_off_thread(listed, self.filter.clone())
            .await
            .map_err(|e| WharfError::internal(format!("checking the listed tools: {e:#}")))?;
        report_dropped(&self.name, &dropped);
        let mut served = self
            .table
            .write()
            .map_err(|_| WharfError::internal("tool table lock poisoned"))?;
        if served.same_tools(&table) {
            return Ok(false);
        }
        *served = Arc::new(table);
        Ok(true)
    }

    /// The counters of the backend's instance pool.
    pub fn pool_status(&self) -> crate::runtime::instance_pool::PoolStatus {
        self.behaviour.pool().status()
    }

    /// The backend's behaviour: calls, session hooks, draining.
    pub fn behaviour(&self) -> &dyn Backend {
        self.behaviour.as_ref()
    }

    /// The tool named `action`, as served now.
    pub fn tool(&self, action: &str) -> Option<ToolDescription> {
        self.tools().tool(action).cloned()
    }

    /// Runs one tool.
    pub async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, WharfError> {
        self.behaviour.call(call).await
    }

    /// The longest a hook or a call may take.
    pub fn call_timeout(&self) -> Duration {
        self.settings.hook_timeout
    }

    /// Drains idle instances (running `shutdown`) and refuses new checkouts.
    pub async fn drain(&self) {
        self.behaviour.drain().await
    }
}

/// Checks and compiles a listing on a blocking thread: its schemas are hostile input.
async fn list_off_thread(
    listed: Vec<ToolDescription>,
    filter: ToolFilter,
) -> Result<(ToolTable, Vec<String>)> {
    tokio::task::spawn_blocking(move || ToolTable::listed(listed, &filter))
        .await
        .context("the tool listing check failed")
}

/// One warning per dropped tool, at most 16 (a hostile listing must not flood the log).
fn report_dropped(backend: &str, dropped: &[String]) {
    for reason in dropped.iter().take(16) {
        tracing::warn!(backend, "a listed tool is not served: {reason}");
    }
    if dropped.len() > 16 {
        tracing::warn!(
            backend,
            "{} more listed tools are not served",
            dropped.len() - 16
        );
    }
}

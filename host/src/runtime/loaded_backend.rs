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
use crate::runtime::world::{self, WorldKind};
use crate::schema_validation::ArgsValidator;
use crate::tool::{ToolDescription, ToolResult};
use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
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
    validators: BTreeMap<String, ArgsValidator>,
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
}

impl LoadedBackend {
    /// A backend from its parts and its behaviour; refuses tools with an invalid input
    /// schema or a name used twice.
    pub fn new(parts: BackendParts, behaviour: Box<dyn Backend>) -> Result<Self> {
        let mut validators = BTreeMap::new();
        for tool in &parts.description.tools {
            let validator = ArgsValidator::new(&tool.input_schema)
                .with_context(|| format!("tool `{}` has an invalid input schema", tool.action))?;
            if validators.insert(tool.action.clone(), validator).is_some() {
                anyhow::bail!(
                    "the backend declares tool `{}` twice; tool names must be unique",
                    tool.action
                );
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
            validators,
            behaviour,
        })
    }

    /// The counters of the backend's instance pool.
    pub fn pool_status(&self) -> crate::runtime::instance_pool::PoolStatus {
        self.behaviour.pool().status()
    }

    /// The backend's behaviour: calls, session hooks, draining.
    pub fn behaviour(&self) -> &dyn Backend {
        self.behaviour.as_ref()
    }

    /// The tool named `action`.
    pub fn tool(&self, action: &str) -> Option<&ToolDescription> {
        self.description.tools.iter().find(|t| t.action == action)
    }

    /// Checks arguments against the tool's schema (4003 missing field, 4004 otherwise).
    pub fn validate_args(&self, action: &str, args: &Value) -> Result<(), WharfError> {
        match self.validators.get(action) {
            Some(v) => v.validate(args),
            None => Err(WharfError::invalid_request(format!(
                "unknown tool `{}:{action}`",
                self.name
            ))),
        }
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

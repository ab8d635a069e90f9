//! A backend as loaded: its compiled component, what it says about itself (see
//! [`backend_description`](crate::runtime::backend_description)), the validators
//! of its tools' argument schemas, and its instance pool. Every call goes through
//! [`LoadedBackend::run`], which checks an instance out, runs one export under the call's
//! deadline, and classifies what happened.

use crate::error_code::{Code, WharfError};
use crate::policy::Grants;
use crate::runtime::backend_description::{BackendDescription, ToolDescription, describe};
use crate::runtime::bindings::wit_types;
use crate::runtime::bindings::{backend::ResourceBackendPre, provider::SandboxProviderPre};
use crate::runtime::compile_cache::{CacheOutcome, CompileCache};
use crate::runtime::guest_ops::{Op, OpOutput, run_op};
use crate::runtime::host_state::{CallContext, HostServices, HostState};
use crate::runtime::instance_pool::{InstancePool, PoolSettings, Pre};
use crate::runtime::wit_version::{World, detect_world};
use crate::schema_validation::ArgsValidator;
use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;
use wasmtime::Engine;
use wasmtime::component::Linker;

/// A compiled, described component, before its pool exists.
pub struct CompiledBackend {
    pre: Pre,
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
    let world = detect_world(engine, &component)?;
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(anyhow::Error::from)
        .context("the component's imports cannot be satisfied")?;
    let pre = match world {
        World::ResourceBackend => Pre::Backend(ResourceBackendPre::new(instance_pre)?),
        World::SandboxProvider => Pre::Provider(SandboxProviderPre::new(instance_pre)?),
    };
    let description = describe(engine, &pre, world, sha256).await?;
    Ok(CompiledBackend {
        pre,
        description,
        cache: outcome,
        compile_time,
    })
}

/// A session as handed to a backend.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// Session id.
    pub id: String,
    /// Caller's key.
    pub key: String,
    /// Session data.
    pub data: Value,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// Expiry, ms since the epoch.
    pub expires_at_ms: Option<u64>,
}

impl SessionView {
    fn to_wit(&self) -> wit_types::SessionInfo {
        wit_types::SessionInfo {
            id: self.id.clone(),
            key: self.key.clone(),
            data: self.data.to_string(),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// One tool call, validated.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Action name.
    pub action: String,
    /// Arguments, already validated against the schema.
    pub args: Value,
    /// The session, when the call has one.
    pub session: Option<SessionView>,
    /// Wall-clock limit for this call.
    pub timeout: Duration,
    /// For logs.
    pub trace_id: Option<String>,
}

/// Binary output of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachmentData {
    /// File name.
    pub name: String,
    /// MIME type.
    pub mime_type: String,
    /// Bytes.
    pub data: Vec<u8>,
}

/// What a tool returned.
#[derive(Debug, Clone)]
pub struct ToolResult {
    /// The JSON result.
    pub content: Value,
    /// Binary outputs.
    pub attachments: Vec<AttachmentData>,
    /// New session data, when the tool changed it.
    pub session_data: Option<Value>,
}

/// The discovery verdict for a stored session.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    /// Usable.
    Alive,
    /// Usable with repaired data.
    AliveWith(Value),
    /// Gone.
    Gone,
}

/// A loaded backend: description, validators and pool.
pub struct LoadedBackend {
    /// The operator's name for it.
    pub name: Arc<str>,
    /// What it says about itself.
    pub description: BackendDescription,
    /// Its instances.
    pub pool: Arc<InstancePool>,
    validators: BTreeMap<String, ArgsValidator>,
    /// The operator config given to warmup.
    pub config: Value,
    /// Whether the compile cache served it at load.
    pub cache: CacheOutcome,
    /// Compile (or cache load) time.
    pub compile_time: Duration,
}

impl std::fmt::Debug for LoadedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedBackend")
            .field("name", &self.name)
            .field("version", &self.description.version)
            .finish()
    }
}

impl LoadedBackend {
    /// Starts the pool of a compiled backend (warming `pool_min` instances).
    pub async fn start(
        name: &str,
        compiled: CompiledBackend,
        settings: PoolSettings,
        config: Value,
        grants: Arc<Grants>,
        services: Arc<HostServices>,
    ) -> Result<Self> {
        let name: Arc<str> = Arc::from(name);
        let mut validators = BTreeMap::new();
        for tool in &compiled.description.tools {
            let validator = ArgsValidator::new(&tool.input_schema)
                .with_context(|| format!("tool `{}` has an invalid input schema", tool.action))?;
            validators.insert(tool.action.clone(), validator);
        }
        let warmup_config = if config.is_null() {
            String::new()
        } else {
            config.to_string()
        };
        let pool = InstancePool::start(
            name.clone(),
            compiled.pre,
            settings,
            warmup_config,
            grants,
            services,
        )
        .await?;
        Ok(Self {
            name,
            description: compiled.description,
            pool,
            validators,
            config,
            cache: compiled.cache,
            compile_time: compiled.compile_time,
        })
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

    pub(crate) async fn run(
        &self,
        op: Op<'_>,
        session_id: Option<&str>,
        timeout: Duration,
        trace_id: Option<String>,
    ) -> Result<OpOutput, WharfError> {
        let deadline = Instant::now() + timeout;
        // Host imports run inside this span, so their log and audit lines carry the
        // backend, the session and the request's trace id.
        let span = tracing::info_span!(
            "backend_call",
            backend = %self.name,
            session = session_id.unwrap_or("-"),
            trace_id = trace_id.as_deref().unwrap_or("-"),
        );
        let context = CallContext {
            session_id: session_id.map(str::to_string),
            deadline: Some(deadline),
            deadline_hit: false,
            trace_id,
        };
        let mut checked_out = self.pool.checkout(context).await?;
        let outcome = {
            let instance = checked_out.instance()?;
            tokio::time::timeout(timeout, run_op(instance, op))
                .instrument(span)
                .await
        };
        match outcome {
            Ok(Ok(Ok(output))) => {
                checked_out.checkin();
                Ok(output)
            }
            Ok(Ok(Err(guest_error))) => {
                checked_out.checkin();
                Err(
                    WharfError::new(Code::from_backend(guest_error.code), guest_error.message)
                        .retryable(guest_error.retryable)
                        .with_data_opt(
                            guest_error.data.and_then(|d| serde_json::from_str(&d).ok()),
                        ),
                )
            }
            Ok(Err(trap)) => {
                let state = &checked_out.instance()?.store.data();
                let err = if state.call.deadline_hit {
                    WharfError::new(
                        Code::Timeout,
                        format!(
                            "backend `{}` exceeded the call deadline of {} ms",
                            self.name,
                            timeout.as_millis()
                        ),
                    )
                } else if state.limiter.denied() {
                    WharfError::internal(format!(
                        "backend `{}` ran out of memory (limit {} MiB); the instance was discarded",
                        self.name,
                        self.pool.settings().memory_limit_bytes >> 20
                    ))
                } else {
                    WharfError::internal(format!(
                        "backend `{}` trapped: {}; the instance was discarded",
                        self.name,
                        trap.root_cause()
                    ))
                };
                tracing::warn!(backend = %self.name, "{}", err.message);
                drop(checked_out);
                Err(err)
            }
            Err(_elapsed) => {
                drop(checked_out);
                Err(WharfError::new(
                    Code::Timeout,
                    format!(
                        "backend `{}` did not answer within {} ms",
                        self.name,
                        timeout.as_millis()
                    ),
                ))
            }
        }
    }

    /// Runs one tool.
    pub async fn call_tool(&self, call: ToolCall) -> Result<ToolResult, WharfError> {
        let session_id = call.session.as_ref().map(|s| s.id.clone());
        let op = Op::Call {
            tool: &call.action,
            args: call.args.to_string(),
            session: call.session.as_ref().map(SessionView::to_wit),
        };
        match self
            .run(
                op,
                session_id.as_deref(),
                call.timeout,
                call.trace_id.clone(),
            )
            .await?
        {
            OpOutput::Call(out) => Ok(ToolResult {
                content: serde_json::from_str(&out.content).unwrap_or(Value::String(out.content)),
                attachments: out
                    .attachments
                    .into_iter()
                    .map(|a| AttachmentData {
                        name: a.name,
                        mime_type: a.mime_type,
                        data: a.data,
                    })
                    .collect(),
                session_data: match out.session_data {
                    Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                        WharfError::new(
                            Code::ExecutionError,
                            format!("the backend returned session data that is not JSON: {e}"),
                        )
                    })?),
                    None => None,
                },
            }),
            _ => Err(WharfError::internal("mismatched answer")),
        }
    }

    /// Creates per-session resources; returns the session data.
    pub async fn initialize(
        &self,
        session_id: &str,
        key: &str,
        config: &Value,
        timeout: Duration,
    ) -> Result<Value, WharfError> {
        let config = if config.is_null() {
            String::new()
        } else {
            config.to_string()
        };
        match self
            .run(
                Op::Initialize {
                    session_id,
                    key,
                    config,
                },
                Some(session_id),
                timeout,
                None,
            )
            .await?
        {
            OpOutput::Initialize(data) => serde_json::from_str(&data).map_err(|e| {
                WharfError::new(
                    Code::ExecutionError,
                    format!("initialize returned session data that is not JSON: {e}"),
                )
            }),
            _ => Err(WharfError::internal("mismatched answer")),
        }
    }

    /// Releases per-session resources.
    pub async fn cleanup(
        &self,
        session: &SessionView,
        timeout: Duration,
    ) -> Result<(), WharfError> {
        self.run(
            Op::Cleanup(session.to_wit()),
            Some(&session.id),
            timeout,
            None,
        )
        .await
        .map(|_| ())
    }

    /// Asks whether a stored session is still usable.
    pub async fn discover(
        &self,
        session: &SessionView,
        timeout: Duration,
    ) -> Result<Discovery, WharfError> {
        match self
            .run(
                Op::Discover(session.to_wit()),
                Some(&session.id),
                timeout,
                None,
            )
            .await?
        {
            OpOutput::Discover(wit_types::Discovery::Alive) => Ok(Discovery::Alive),
            OpOutput::Discover(wit_types::Discovery::AliveWith(data)) => Ok(Discovery::AliveWith(
                serde_json::from_str(&data).map_err(|e| {
                    WharfError::new(
                        Code::ExecutionError,
                        format!("discover returned data that is not JSON: {e}"),
                    )
                })?,
            )),
            OpOutput::Discover(wit_types::Discovery::Gone) => Ok(Discovery::Gone),
            _ => Err(WharfError::internal("mismatched answer")),
        }
    }

    /// Whether this backend is a resource backend with hooks (not a provider).
    pub fn is_resource_backend(&self) -> bool {
        self.description.world == World::ResourceBackend
    }

    /// Drains idle instances (running `shutdown`) and refuses new checkouts.
    pub async fn drain(&self) {
        self.pool.drain().await
    }
}

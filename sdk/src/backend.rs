//! Resource backends: tools plus optional lifecycle hooks, and the glue that exports them.

use crate::bindings::backend_world::exports::wharf::plugin0_3_0::tool_listing;
use crate::bindings::{backend_world::exports::wharf::plugin0_2_0::backend as wit, wit_types};
use crate::{Call, Session, ToolError, ToolSpec, Tools};
use serde_json::Value;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

/// What a backend will ask the host for. Asking at run time for more is refused, and an
/// upgrade that asks for more waits for an operator's approval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Container images, e.g. `wharf-sandbox:test`.
    pub images: Vec<String>,
    /// `host:port` patterns for outbound HTTP, wildcards allowed.
    pub http_hosts: Vec<String>,
    /// Docker networks beyond `none`.
    pub networks: Vec<String>,
    /// Host paths to mount into containers.
    pub host_mounts: Vec<String>,
}

impl From<Capabilities> for wit_types::Capabilities {
    fn from(c: Capabilities) -> Self {
        Self {
            images: c.images,
            http_hosts: c.http_hosts,
            networks: c.networks,
            host_mounts: c.host_mounts,
        }
    }
}

/// Name, version and description of a backend, plus its schemas and capabilities.
#[derive(Debug, Clone, Default)]
pub struct BackendInfo {
    /// Default name (the operator may load it under another).
    pub name: String,
    /// Semantic version.
    pub version: String,
    /// One line for people and agents.
    pub description: String,
    /// JSON Schema of the operator's config.
    pub config_schema: Option<Value>,
    /// JSON Schema of the per-session config given to `initialize`.
    pub session_config_schema: Option<Value>,
    /// What it will ask the host for.
    pub requires: Capabilities,
}

impl BackendInfo {
    /// Name, version and description.
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            ..Self::default()
        }
    }
    /// Declares the operator config type.
    pub fn config<T: schemars::JsonSchema>(mut self) -> Self {
        self.config_schema = serde_json::to_value(schemars::schema_for!(T)).ok();
        self
    }
    /// Declares the per-session config type.
    pub fn session_config<T: schemars::JsonSchema>(mut self) -> Self {
        self.session_config_schema = serde_json::to_value(schemars::schema_for!(T)).ok();
        self
    }
    /// Declares the capabilities the backend will ask for.
    pub fn requires(mut self, requires: Capabilities) -> Self {
        self.requires = requires;
        self
    }
}

/// The answer of [`Backend::discover`] for a stored session.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    /// Usable as stored.
    Alive,
    /// Usable with repaired session data.
    AliveWith(Value),
    /// Gone: the host removes the record.
    Gone,
}

/// A resource backend. Implement `info` and `tools`; every hook has a default.
///
/// Instances are pooled by the host: `warmup` runs once per instance (possibly for several
/// at once), and an instance serves one call at a time.
pub trait Backend: Sized + 'static {
    /// A fresh instance, before `warmup`.
    fn new() -> Self;
    /// Name, version, description, schemas and capabilities.
    fn info() -> BackendInfo;
    /// The tools this backend offers.
    fn tools() -> Tools<Self>;
    /// Builds shared resources; `config` is the operator's JSON (`null` when none).
    fn warmup(&mut self, _config: Value) -> Result<(), ToolError> {
        Ok(())
    }
    /// Releases shared resources before the instance is dropped.
    fn shutdown(&mut self) {}
    /// Creates per-session resources and returns the session data the host stores.
    fn initialize(
        &mut self,
        _session_id: &str,
        _key: &str,
        _config: Value,
    ) -> Result<Value, ToolError> {
        Ok(Value::Object(Default::default()))
    }
    /// Releases per-session resources; must succeed when they are already gone.
    fn cleanup(&mut self, _session: &Session) -> Result<(), ToolError> {
        Ok(())
    }
    /// Whether a stored session is still usable.
    fn discover(&mut self, _session: &Session) -> Result<Discovery, ToolError> {
        Ok(Discovery::Alive)
    }
    /// The tools as they are now, for a backend whose tools are known only after `warmup`
    /// or change while it runs (contract 0.3.0's `tool-listing`). `None`, the default,
    /// means the fixed list of [`Backend::tools`]; a list replaces it. The host first asks
    /// an instance that was never warmed up: `None` there marks the tools fixed for good,
    /// so a backend whose tools depend on its config answers a list or an error there.
    /// Then it asks once the pool is warm, and every `[backends.NAME.tools] poll_seconds`.
    /// Calls of a listed tool that [`Backend::tools`] does not register reach
    /// [`Backend::call_listed`].
    fn list_tools(&mut self) -> Result<Option<Vec<ToolSpec>>, ToolError> {
        Ok(None)
    }
    /// Runs a tool [`Backend::list_tools`] listed and [`Backend::tools`] does not register.
    /// The host has already checked `args` against the listed input schema.
    fn call_listed(
        &mut self,
        tool: &str,
        _args: Value,
        _call: &mut Call,
    ) -> Result<Value, ToolError> {
        Err(ToolError::new(
            crate::codes::INVALID_REQUEST,
            format!("unknown tool `{tool}`"),
        ))
    }
}

struct Instance<B> {
    backend: B,
    tools: Tools<B>,
}

thread_local! {
    // A component instance is single-threaded; this holds the one backend value.
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn with_instance<B: Backend, R>(f: impl FnOnce(&mut Instance<B>) -> R) -> R {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let mut instance = match slot.take().map(|b| b.downcast::<Instance<B>>()) {
            Some(Ok(instance)) => instance,
            _ => Box::new(Instance {
                backend: B::new(),
                tools: B::tools(),
            }),
        };
        let result = f(&mut instance);
        *slot = Some(instance);
        result
    })
}

fn parse_config(config: &str) -> Result<Value, ToolError> {
    if config.trim().is_empty() {
        return Ok(Value::Null);
    }
    Ok(serde_json::from_str(config)?)
}

/// The export glue for a backend type; used by [`crate::export_backend!`].
pub struct BackendExport<B>(PhantomData<B>);

impl<B: Backend> wit::Guest for BackendExport<B> {
    fn describe() -> wit_types::BackendInfo {
        let info = B::info();
        let tools = with_instance::<B, _>(|i| i.tools.specs());
        wit_types::BackendInfo {
            name: info.name,
            version: info.version,
            description: info.description,
            tools,
            config_schema: info.config_schema.map(|s| s.to_string()),
            session_config_schema: info.session_config_schema.map(|s| s.to_string()),
            requires: info.requires.into(),
        }
    }

    fn warmup(config: String) -> Result<(), wit_types::Error> {
        crate::host::install_panic_hook();
        let config = parse_config(&config)?;
        with_instance::<B, _>(|i| i.backend.warmup(config)).map_err(Into::into)
    }

    fn shutdown() {
        with_instance::<B, _>(|i| i.backend.shutdown())
    }

    fn initialize(
        session_id: String,
        key: String,
        config: String,
    ) -> Result<String, wit_types::Error> {
        let config = parse_config(&config)?;
        let data = with_instance::<B, _>(|i| i.backend.initialize(&session_id, &key, config))?;
        Ok(data.to_string())
    }

    fn cleanup(session: wit_types::SessionInfo) -> Result<(), wit_types::Error> {
        let session = Session::from(session);
        with_instance::<B, _>(|i| i.backend.cleanup(&session)).map_err(Into::into)
    }

    fn discover(session: wit_types::SessionInfo) -> Result<wit_types::Discovery, wit_types::Error> {
        let session = Session::from(session);
        Ok(
            match with_instance::<B, _>(|i| i.backend.discover(&session))? {
                Discovery::Alive => wit_types::Discovery::Alive,
                Discovery::AliveWith(data) => wit_types::Discovery::AliveWith(data.to_string()),
                Discovery::Gone => wit_types::Discovery::Gone,
            },
        )
    }

    fn call(
        tool: String,
        args: String,
        session: Option<wit_types::SessionInfo>,
    ) -> Result<wit_types::ToolOutput, wit_types::Error> {
        let args: Value = serde_json::from_str(&args).map_err(ToolError::from)?;
        let mut call = Call::new(session.map(Session::from));
        let content = with_instance::<B, _>(|i| {
            if i.tools.has(&tool) {
                i.tools.call(&mut i.backend, &tool, args, &mut call)
            } else {
                i.backend.call_listed(&tool, args, &mut call)
            }
        })?;
        let (attachments, session_data) = call.into_outputs();
        Ok(wit_types::ToolOutput {
            content: content.to_string(),
            attachments: attachments
                .into_iter()
                .map(|a| wit_types::Attachment {
                    name: a.name,
                    mime_type: a.mime_type,
                    data: a.data,
                })
                .collect(),
            session_data: session_data.map(|d| d.to_string()),
        })
    }
}

impl<B: Backend> tool_listing::Guest for BackendExport<B> {
    fn list_tools() -> Result<Option<Vec<wit_types::ToolSpec>>, wit_types::Error> {
        let listed = with_instance::<B, _>(|i| i.backend.list_tools())?;
        Ok(listed.map(|tools| tools.into_iter().map(Into::into).collect()))
    }
}

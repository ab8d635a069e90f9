//! What a component says about itself (`describe`), as the host keeps it: its tools with
//! their schemas and hints, its declared capabilities and, for providers, its native
//! features. The sandbox toolset adds a provider's tools when it wraps it.

use crate::imports::services::HostServices;
use crate::policy::Grants;
use crate::runtime::guest_types::{ProviderFeatures, RawBackendInfo, RawToolSpec};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::GuestWorld;
use crate::runtime::provider_guest::ProviderPre;
use crate::runtime::resource_guest::ResourcePre;
use crate::runtime::world::{ContractVersion, Target, WorldKind};
use crate::tool::ToolDescription;
use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub use crate::runtime::guest_types::Requires;

/// What a component says about itself, plus what the host learned loading it.
#[derive(Debug, Clone, Serialize)]
pub struct BackendDescription {
    /// The component's own name for itself.
    pub declared_name: String,
    /// Version.
    pub version: String,
    /// One line.
    pub description: String,
    /// The world it targets.
    pub world: WorldKind,
    /// The contract version it was built against.
    pub contract: ContractVersion,
    /// The contract as `package@version`.
    pub wit: String,
    /// Tools (a provider's are the standard toolset's, added when it is wrapped).
    pub tools: Vec<ToolDescription>,
    /// Operator config schema.
    pub config_schema: Option<Value>,
    /// Per-session config schema.
    pub session_config_schema: Option<Value>,
    /// Declared capabilities.
    pub requires: Requires,
    /// Native provider features (providers only).
    #[serde(skip)]
    pub features: ProviderFeatures,
    /// Their names.
    pub provider_features: Vec<String>,
    /// Whether its tools may change while it runs (contract 0.3.0's `tool-listing`
    /// answered a list or an error in the instance `describe` ran in): the host then asks
    /// again after warmup and on an interval.
    #[serde(skip)]
    pub lists_tools: bool,
    /// sha256 of the `.wasm`.
    pub sha256: String,
}

fn parse_schema(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// A tool a running guest listed (`tool-listing`): a schema that is not JSON becomes
/// `null`, which the listing's checks drop (`tool_filter::check_listing`).
pub(crate) fn listed_tool(t: RawToolSpec) -> ToolDescription {
    ToolDescription {
        input_schema: serde_json::from_str(&t.input_schema).unwrap_or(Value::Null),
        output_schema: parse_schema(t.output_schema),
        action: t.name,
        description: t.description,
        session: t.session,
        annotations: t.annotations,
    }
}

fn tools_of(info: &RawBackendInfo) -> Vec<ToolDescription> {
    info.tools
        .iter()
        .map(|t| ToolDescription {
            action: t.name.clone(),
            description: t.description.clone(),
            input_schema: serde_json::from_str(&t.input_schema).unwrap_or(Value::Bool(true)),
            output_schema: parse_schema(t.output_schema.clone()),
            session: t.session,
            annotations: t.annotations,
        })
        .collect()
}

/// The component of either world, pre-instantiated.
#[derive(Clone)]
pub enum CompiledPre {
    /// A resource backend.
    Resource(ResourcePre),
    /// A sandbox provider.
    Provider(ProviderPre),
}

/// A throwaway store that grants nothing, for `describe`.
fn describe_store(engine: &wasmtime::Engine) -> wasmtime::Store<HostState> {
    let mut store = wasmtime::Store::new(
        engine,
        HostState::new(
            Arc::from("describe"),
            64 << 20,
            Arc::new(Grants::default()),
            Arc::new(HostServices::default()),
        ),
    );
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(500);
    store
}

/// Instantiates the component once in a throwaway store and asks it to describe itself.
pub(crate) async fn describe(
    pre: &CompiledPre,
    target: Target,
    sha256: String,
) -> Result<BackendDescription> {
    let common = |declared_name, version, description, requires| BackendDescription {
        declared_name,
        version,
        description,
        world: target.kind,
        contract: target.version,
        wit: target.version.to_string(),
        tools: Vec::new(),
        config_schema: None,
        session_config_schema: None,
        requires,
        features: ProviderFeatures::default(),
        provider_features: Vec::new(),
        lists_tools: false,
        sha256: sha256.clone(),
    };
    let described = tokio::time::timeout(Duration::from_secs(10), async {
        match pre {
            CompiledPre::Resource(p) => {
                let mut store = describe_store(p.engine());
                let exports = p.instantiate(&mut store).await?;
                let info = exports.describe(&mut store).await?;
                // Before any warmup: `none` marks the tools fixed; a backend whose tools
                // depend on its config answers a list or an error here.
                let lists_tools = !matches!(exports.list_tools(&mut store).await, Ok(Ok(None)));
                anyhow::Ok(BackendDescription {
                    lists_tools,
                    tools: tools_of(&info),
                    config_schema: parse_schema(info.config_schema),
                    session_config_schema: parse_schema(info.session_config_schema),
                    ..common(info.name, info.version, info.description, info.requires)
                })
            }
            CompiledPre::Provider(p) => {
                let mut store = describe_store(p.engine());
                let exports = p.instantiate(&mut store).await?;
                let info = exports.describe(&mut store).await?;
                anyhow::Ok(BackendDescription {
                    provider_features: info.features.names(),
                    features: info.features,
                    ..common(info.name, info.version, info.description, info.requires)
                })
            }
        }
    })
    .await
    .map_err(|_| anyhow!("describe did not answer within 10 s"))?
    .context("describe failed")?;
    Ok(described)
}

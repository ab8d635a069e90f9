//! What a component says about itself (`describe`), as the host keeps it: its tools with
//! their schemas and hints, its declared capabilities and, for providers, its native
//! features.

use crate::policy::Grants;
use crate::runtime::bindings::wit_types;
use crate::runtime::host_state::{HostServices, HostState};
use crate::runtime::instance_pool::Pre;
use crate::runtime::wit_version::World;
use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::Engine;

/// Whether a tool runs inside a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionNeed {
    /// Stateless.
    None,
    /// Needs a session.
    Required,
    /// Uses one when given.
    Optional,
}

/// Hints for agents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ToolAnnotations {
    /// Changes nothing.
    pub read_only: bool,
    /// May destroy data.
    pub destructive: bool,
    /// Repeating it has no further effect.
    pub idempotent: bool,
    /// Reaches beyond the backend.
    pub open_world: bool,
}

/// One tool as the host knows it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescription {
    /// The action name (without the backend prefix).
    pub action: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the result, if promised.
    pub output_schema: Option<Value>,
    /// Session need.
    pub session: SessionNeed,
    /// Hints.
    pub annotations: ToolAnnotations,
}

/// Capabilities a backend declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Requires {
    /// Container images.
    pub images: Vec<String>,
    /// Outbound HTTP `host:port` patterns.
    pub http_hosts: Vec<String>,
    /// Docker networks.
    pub networks: Vec<String>,
    /// Host paths to mount.
    pub host_mounts: Vec<String>,
}

impl From<wit_types::Capabilities> for Requires {
    fn from(c: wit_types::Capabilities) -> Self {
        Self {
            images: c.images,
            http_hosts: c.http_hosts,
            networks: c.networks,
            host_mounts: c.host_mounts,
        }
    }
}

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
    pub world: World,
    /// The WIT package version.
    pub wit: String,
    /// Tools (empty for providers until the host's sandbox toolset wraps them).
    pub tools: Vec<ToolDescription>,
    /// Operator config schema.
    pub config_schema: Option<Value>,
    /// Per-session config schema.
    pub session_config_schema: Option<Value>,
    /// Declared capabilities.
    pub requires: Requires,
    /// Native provider features, for providers.
    pub provider_features: Vec<String>,
    /// sha256 of the `.wasm`.
    pub sha256: String,
}

fn parse_schema(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn provider_feature_names(
    flags: crate::runtime::bindings::provider::exports::wharf::plugin::provider::ProviderFeatures,
) -> Vec<String> {
    use crate::runtime::bindings::provider::exports::wharf::plugin::provider::ProviderFeatures as F;
    [
        (F::READ_FILE, "read-file"),
        (F::WRITE_FILE, "write-file"),
        (F::LIST_DIR, "list-dir"),
        (F::TAGS, "tags"),
        (F::STDIN, "stdin"),
    ]
    .into_iter()
    .filter(|(f, _)| flags.contains(*f))
    .map(|(_, n)| n.to_string())
    .collect()
}

/// Instantiates the component once in a throwaway store and asks it to describe itself.
pub(crate) async fn describe(
    engine: &Engine,
    pre: &Pre,
    world: World,
    sha256: String,
) -> Result<BackendDescription> {
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
    let wit = format!(
        "{}@{}",
        crate::runtime::wit_version::WIT_PACKAGE,
        crate::runtime::wit_version::WIT_VERSION
    );
    let described = tokio::time::timeout(Duration::from_secs(10), async {
        match pre {
            Pre::Backend(p) => {
                let b = p.instantiate_async(&mut store).await?;
                let info = b.wharf_plugin_backend().call_describe(&mut store).await?;
                let tools = info
                    .tools
                    .into_iter()
                    .map(|t| ToolDescription {
                        action: t.name,
                        description: t.description,
                        input_schema: serde_json::from_str(&t.input_schema)
                            .unwrap_or(Value::Bool(true)),
                        output_schema: parse_schema(t.output_schema),
                        session: match t.session {
                            wit_types::SessionNeed::None => SessionNeed::None,
                            wit_types::SessionNeed::Required => SessionNeed::Required,
                            wit_types::SessionNeed::Optional => SessionNeed::Optional,
                        },
                        annotations: ToolAnnotations {
                            read_only: t.annotations.read_only,
                            destructive: t.annotations.destructive,
                            idempotent: t.annotations.idempotent,
                            open_world: t.annotations.open_world,
                        },
                    })
                    .collect();
                anyhow::Ok(BackendDescription {
                    declared_name: info.name,
                    version: info.version,
                    description: info.description,
                    world,
                    wit: wit.clone(),
                    tools,
                    config_schema: parse_schema(info.config_schema),
                    session_config_schema: parse_schema(info.session_config_schema),
                    requires: info.requires.into(),
                    provider_features: Vec::new(),
                    sha256: sha256.clone(),
                })
            }
            Pre::Provider(p) => {
                let pr = p.instantiate_async(&mut store).await?;
                let info = pr.wharf_plugin_provider().call_describe(&mut store).await?;
                anyhow::Ok(BackendDescription {
                    declared_name: info.name,
                    version: info.version,
                    description: info.description,
                    world,
                    wit: wit.clone(),
                    tools: crate::sandbox_toolset::tool_descriptions(),
                    config_schema: None,
                    session_config_schema: Some(crate::sandbox_toolset::session_spec::schema()),
                    requires: info.requires.into(),
                    provider_features: provider_feature_names(info.features),
                    sha256: sha256.clone(),
                })
            }
        }
    })
    .await
    .map_err(|_| anyhow!("describe did not answer within 10 s"))?
    .context("describe failed")?;
    Ok(described)
}

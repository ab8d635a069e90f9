//! What the front door tells its adapters about a loaded backend and a deployment: plain
//! values (names, text, numbers, JSON), so no adapter names or reaches a runtime type
//! (ARCHITECTURE.md, layers). Each adapter shapes its own reply from them.

use crate::backend_status::PendingUpgrade;
use crate::requires::Requires;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::tool::ToolDescription;
use serde_json::Value;

/// A loaded backend as the adapters see it.
#[derive(Debug, Clone)]
pub struct BackendSummary {
    /// The operator's name for it.
    pub name: String,
    /// The component's own name.
    pub declared_name: String,
    /// Its version.
    pub version: String,
    /// One line about it.
    pub description: String,
    /// The world it targets, as the contract names it (`resource-backend`, …).
    pub world: Value,
    /// The contract version it was built against.
    pub contract: Value,
    /// The contract as `package@version`.
    pub wit: String,
    /// sha256 of its `.wasm`.
    pub sha256: String,
    /// Its tools.
    pub tools: Vec<ToolDescription>,
    /// What it declares it will reach.
    pub requires: Requires,
    /// The native operations of a sandbox provider.
    pub provider_features: Vec<String>,
    /// The operator's config, secrets redacted.
    pub config: Value,
    /// Its instance pool now (idle, busy, created, …).
    pub instances: Value,
    /// Its pool and call limits.
    pub limits: BackendLimits,
    /// The isolation levels its containers can run at (granted, and offered by the engine).
    pub isolation: Vec<String>,
    /// Seconds between two listings of its tools, when it lists them while it runs
    /// (contract 0.3.0's `tool-listing`); `None` when its tools are fixed.
    pub tools_listed_every_seconds: Option<u64>,
    /// Its warm pool: started sandboxes waiting now, and how many it keeps (per shape ×
    /// shapes); `None` without a pool.
    pub warm_pool: Option<WarmPoolFill>,
}

/// A warm pool's fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WarmPoolFill {
    /// Started sandboxes waiting for a session now.
    pub idle: usize,
    /// How many it keeps when full.
    pub size: usize,
}

/// A backend's pool and call limits.
#[derive(Debug, Clone, Copy)]
pub struct BackendLimits {
    /// Instances kept warm.
    pub pool_min: usize,
    /// Instances at most.
    pub pool_max: usize,
    /// Linear memory per instance, bytes.
    pub memory_bytes: usize,
    /// Deadline of a call, ms.
    pub call_timeout_ms: u64,
}

impl BackendSummary {
    pub(super) fn of(b: &LoadedBackend) -> Self {
        let d = &b.description;
        let settings = &b.settings;
        Self {
            name: b.name.to_string(),
            declared_name: d.declared_name.clone(),
            version: d.version.clone(),
            description: d.description.clone(),
            world: serde_json::to_value(d.world).unwrap_or(Value::Null),
            contract: serde_json::to_value(d.contract).unwrap_or(Value::Null),
            wit: d.wit.clone(),
            sha256: d.sha256.clone(),
            tools: b.tools().tools().to_vec(),
            requires: d.requires.clone(),
            provider_features: d.provider_features.clone(),
            config: crate::redact::redact(&b.config),
            instances: serde_json::to_value(b.pool_status()).unwrap_or(Value::Null),
            isolation: b.isolation.iter().map(|l| l.name().to_string()).collect(),
            tools_listed_every_seconds: b.poll().map(|p| p.every().as_secs()),
            warm_pool: b
                .behaviour()
                .warm_sandboxes()
                .map(|(idle, size)| WarmPoolFill { idle, size }),
            limits: BackendLimits {
                pool_min: settings.min,
                pool_max: settings.max,
                memory_bytes: settings.memory_limit_bytes,
                call_timeout_ms: u64::try_from(settings.hook_timeout.as_millis())
                    .unwrap_or(u64::MAX),
            },
        }
    }
}

/// What a deployment did.
#[derive(Debug, Clone)]
pub enum Deployment {
    /// The new version serves.
    Active(Box<BackendSummary>),
    /// The new version waits for approval; the running one keeps serving.
    Pending(Box<PendingUpgrade>),
}

/// A tool found by any of its names, as the adapters see it.
#[derive(Debug, Clone)]
pub struct FoundTool {
    /// The backend's name.
    pub backend: String,
    /// The action.
    pub action: String,
    /// The backend's version.
    pub version: String,
    /// The tool.
    pub tool: ToolDescription,
}

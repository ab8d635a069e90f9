//! `[backends.NAME]`: one backend, its limits, session lifetimes and warm pool.

use super::{OCI_PREFIX, OciSource, expand_env};
use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// One backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// The `.wasm` file, relative to the config file; `bundled:NAME` for a bundled example.
    pub path: String,
    /// Loaded only when true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The operator's config handed to `warmup`.
    #[serde(default)]
    pub config: Option<toml::Value>,
    /// Resource limits.
    #[serde(default)]
    pub limits: Limits,
    /// Session lifetimes.
    #[serde(default)]
    pub sessions: SessionLimits,
    /// What the backend may use: images, mounts, networks, outbound HTTP.
    #[serde(default)]
    pub grants: crate::policy::Grants,
    /// The `.wasm`'s expected sha256 (hex); a file that does not match is refused.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Sandboxes a provider backend keeps started for new sessions (none by default).
    #[serde(default)]
    pub warm_pool: Option<WarmPoolConfig>,
    /// Refuse this `oci://` backend without a valid signature (also `[oci]
    /// require_signature` for all).
    #[serde(default)]
    pub require_signature: bool,
    /// Where an `oci://` backend was pulled from (set at load, never configured).
    #[serde(skip)]
    pub oci_source: Option<OciSource>,
    /// Which tools are served, and how often a backend whose tools change is asked.
    #[serde(default)]
    pub tools: ToolSettings,
}

/// `[backends.X.tools]`: the operator's include and exclude patterns (`*`, `?`) over the
/// backend's actions, and how often the host asks a backend whose tools change while it
/// runs (contract 0.3.0's `tool-listing`, the MCP bridge) for them.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ToolSettings {
    /// Actions served; empty serves every action.
    pub include: Vec<String>,
    /// Actions never served.
    pub exclude: Vec<String>,
    /// Seconds between two listings (1 to 86 400; default 30).
    pub poll_seconds: u64,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            include: Vec::new(),
            exclude: Vec::new(),
            poll_seconds: 30,
        }
    }
}

impl ToolSettings {
    /// The patterns as the tool filter takes them.
    pub fn filter(&self) -> crate::tool_filter::ToolFilter {
        crate::tool_filter::ToolFilter {
            include: self.include.clone(),
            exclude: self.exclude.clone(),
        }
    }
}

/// `[backends.X.warm_pool]`: started sandboxes kept for sessions whose config asks for one
/// of `shapes` (ARCHITECTURE.md, "Warm sandboxes").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WarmPoolConfig {
    /// Sandboxes kept per shape.
    pub size: u32,
    /// An idle sandbox older than this is destroyed and replaced; 0 = kept until taken.
    pub max_idle_seconds: u64,
    /// Creates running at once while the pool refills (a burst does not flood the engine).
    pub refill_concurrency: u32,
    /// The session configs to keep warm (the sandbox session config: image, network,
    /// cpu, memory, env, workdir); empty = one shape, the default config.
    pub shapes: Vec<toml::Value>,
}

impl Default for WarmPoolConfig {
    fn default() -> Self {
        Self {
            size: 0,
            max_idle_seconds: 600,
            refill_concurrency: 4,
            shapes: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}

impl BackendConfig {
    /// A backend at `path` with every other setting at its default.
    pub fn at(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            enabled: true,
            config: None,
            limits: Limits::default(),
            sessions: SessionLimits::default(),
            grants: Default::default(),
            sha256: None,
            warm_pool: None,
            require_signature: false,
            oci_source: None,
            tools: ToolSettings::default(),
        }
    }

    /// Whether `path` is an `oci://` reference.
    pub fn is_oci(&self) -> bool {
        self.path.starts_with(OCI_PREFIX)
    }

    /// Parses a plugins-dir sidecar (`NAME.toml`: the keys of a `[backends.NAME]` table,
    /// `path` excepted) for the component at `path`, expanding `${VAR}` through `env`.
    pub fn from_sidecar(
        text: &str,
        path: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut value: toml::Value = toml::from_str(text).context("invalid TOML")?;
        expand_env(&mut value, &env)?;
        let Some(table) = value.as_table_mut() else {
            bail!("expected a table");
        };
        match table.get("path") {
            Some(toml::Value::String(p)) if p.starts_with(OCI_PREFIX) => {}
            Some(_) => bail!(
                "`path` is not allowed here unless it is an `oci://` reference: the component is the `.wasm` beside this file"
            ),
            None => {
                table.insert("path".into(), toml::Value::String(path.into()));
            }
        }
        let config: BackendConfig = value.try_into().context("invalid backend settings")?;
        config.validate()?;
        Ok(config)
    }

    /// Refuses pool limits that cross, invalid grants, and a warm pool that would keep more
    /// sandboxes than `grants.max_containers` allows.
    pub fn validate(&self) -> Result<()> {
        if self.limits.pool_max == 0 || self.limits.pool_min > self.limits.pool_max {
            bail!("limits need 1 <= pool_max and pool_min <= pool_max");
        }
        self.grants.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        self.tools
            .filter()
            .check()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if !(1..=86_400).contains(&self.tools.poll_seconds) {
            bail!(
                "tools.poll_seconds = {} must be 1 to 86400",
                self.tools.poll_seconds
            );
        }
        if let Some(pool) = &self.warm_pool {
            let shapes = u64::try_from(pool.shapes.len().max(1)).unwrap_or(u64::MAX);
            let kept = u64::from(pool.size).saturating_mul(shapes);
            let cap = u64::from(self.grants.max_containers);
            if kept > cap {
                bail!(
                    "warm_pool keeps {kept} sandboxes ({} per shape x {shapes} shapes), above grants.max_containers = {cap}",
                    pool.size
                );
            }
        }
        Ok(())
    }

    /// Refuses `wasm` when a pinned `sha256` does not match it.
    pub fn check_sha256(&self, wasm: &[u8]) -> Result<()> {
        use sha2::{Digest, Sha256};
        if let Some(expected) = &self.sha256 {
            let actual = hex::encode(Sha256::digest(wasm));
            if !expected.trim().eq_ignore_ascii_case(&actual) {
                bail!(
                    "integrity check failed: the component's sha256 is {actual}, but the configuration pins {}",
                    expected.trim()
                );
            }
        }
        Ok(())
    }
}

/// Resource limits of one backend.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Linear memory per instance, in MiB.
    pub memory_mb: u64,
    /// Wall-clock deadline per call, in ms (also covers waits on host imports); when
    /// unset, `[server] default_call_timeout_ms`.
    pub call_timeout_ms: Option<u64>,
    /// Instances kept warm.
    pub pool_min: usize,
    /// Most instances, hence most concurrent calls.
    pub pool_max: usize,
    /// An instance is retired after this many calls.
    pub retire_after_calls: u64,
    /// An instance whose memory grew past this many MiB is retired at check-in.
    pub memory_high_water_mb: u64,
    /// How long a call may wait for a free instance before it answers 5011 "busy"
    /// (retryable), in ms.
    pub queue_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: 128,
            call_timeout_ms: None,
            pool_min: 1,
            pool_max: 16,
            retire_after_calls: 10_000,
            memory_high_water_mb: 96,
            queue_timeout_ms: 30_000,
        }
    }
}

/// Session lifetimes of one backend.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SessionLimits {
    /// Idle time before a session is released (or paused, see `on_idle`), in s; 0 means
    /// no idle expiry.
    pub idle_ttl_seconds: u64,
    /// Hard running lifetime, in s; 0 means none. Time spent paused does not count.
    pub max_lifetime_seconds: u64,
    /// What the idle TTL does to a session: `destroy` it, `pause` its sandbox, or
    /// `snapshot` it (archive: its files kept in a snapshot, its sandbox destroyed) until a
    /// call resumes it; the last two need a provider with the `suspension` feature.
    pub on_idle: OnIdle,
    /// How long a paused session is kept before `on_paused_ttl` ends it, in s (default
    /// one day); 0 means until it is resumed or deleted.
    pub paused_ttl_seconds: u64,
    /// What the paused TTL does to a session: `destroy` it (the default), or `snapshot` it
    /// (archive it, as `on_idle = "snapshot"` does).
    pub on_paused_ttl: OnPausedTtl,
    /// Sessions of the backend that may be paused at once, across nodes (default 64; 0
    /// means none may be). A pause past it is refused (4030), and an idle session past
    /// it is released as under `on_idle = "destroy"`.
    pub max_paused: u64,
    /// How long an archived session is kept before it is destroyed with its snapshot, in
    /// s (default a week); 0 means until it is resumed or deleted.
    pub archived_ttl_seconds: u64,
    /// Sessions of the backend that may be archived at once, across nodes (default 256; 0
    /// means none may be). An idle session past it is released as under `on_idle =
    /// "destroy"`.
    pub max_archived: u64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            idle_ttl_seconds: 1800,
            max_lifetime_seconds: 0,
            on_idle: OnIdle::Destroy,
            paused_ttl_seconds: 86_400,
            on_paused_ttl: OnPausedTtl::Destroy,
            max_paused: 64,
            archived_ttl_seconds: 604_800,
            max_archived: 256,
        }
    }
}

/// What happens to a session whose idle TTL ran out.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnIdle {
    /// Released: its sandbox destroyed.
    #[default]
    Destroy,
    /// Its sandbox paused (memory and processes kept), resumed by the next call.
    Pause,
    /// Archived: its sandbox's filesystem snapshotted and the sandbox destroyed (memory
    /// and processes not kept), restored from the snapshot by the next call.
    Snapshot,
}

/// What happens to a paused session whose paused TTL ran out.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnPausedTtl {
    /// Released: its sandbox destroyed.
    #[default]
    Destroy,
    /// Archived: its files kept in a snapshot, its sandbox destroyed.
    Snapshot,
}

impl OnIdle {
    /// The word the config file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            OnIdle::Destroy => "destroy",
            OnIdle::Pause => "pause",
            OnIdle::Snapshot => "snapshot",
        }
    }
}

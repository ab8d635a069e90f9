//! `wharf.toml`: the server, and one table per backend (path, enabled, config, limits,
//! session lifetimes). `${VAR}` in any string is replaced from the environment; a variable
//! that is not set is a start-up error, never an empty string.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct WharfConfig {
    /// The HTTP server.
    #[serde(default)]
    pub server: ServerConfig,
    /// Backends by the operator's name.
    #[serde(default)]
    pub backends: BTreeMap<String, BackendConfig>,
    /// The state store (`[store] url = "postgres://…"`).
    #[serde(default)]
    pub store: StoreConfig,
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://PATH` or `postgres://…`.
    pub url: Option<String>,
}

/// The HTTP server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Where the compile cache and state live.
    pub data_dir: PathBuf,
    /// Largest request body accepted, in bytes (4013 beyond).
    pub max_body_bytes: usize,
    /// Default wall-clock limit for a tool call, in ms, when neither the caller nor the
    /// backend's limits say otherwise.
    pub default_call_timeout_ms: u64,
    /// The Docker engine (`unix:///var/run/docker.sock`, `tcp://host:2375`); `DOCKER_HOST`
    /// or the local socket when unset.
    pub docker_host: Option<String>,
    /// The state store: `sqlite://PATH` or `postgres://…`; the SQLite file `wharf.db`
    /// in the data dir when unset.
    pub store_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7420)),
            data_dir: PathBuf::from(".wharf"),
            max_body_bytes: 4 * 1024 * 1024,
            default_call_timeout_ms: 30_000,
            docker_host: None,
            store_url: None,
        }
    }
}

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
}

fn yes() -> bool {
    true
}

/// Resource limits of one backend.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Linear memory per instance, in MiB.
    pub memory_mb: u64,
    /// Wall-clock deadline per call, in ms (also covers waits on host imports).
    pub call_timeout_ms: u64,
    /// Instances kept warm.
    pub pool_min: usize,
    /// Most instances, hence most concurrent calls.
    pub pool_max: usize,
    /// An instance is retired after this many calls.
    pub retire_after_calls: u64,
    /// An instance whose memory grew past this many MiB is retired at check-in.
    pub memory_high_water_mb: u64,
    /// How long a call may wait for a free instance before it answers 4290, in ms.
    pub queue_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: 128,
            call_timeout_ms: 30_000,
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
    /// Idle time before a session is released, in s; 0 means no idle expiry.
    pub idle_ttl_seconds: u64,
    /// Hard lifetime, in s; 0 means none.
    pub max_lifetime_seconds: u64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            idle_ttl_seconds: 1800,
            max_lifetime_seconds: 0,
        }
    }
}

impl WharfConfig {
    /// Reads and parses a config file; relative backend paths become relative to it.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut config = Self::parse(&text, |name| std::env::var(name).ok())
            .with_context(|| format!("in {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for backend in config.backends.values_mut() {
            if !backend.path.starts_with("bundled:") && Path::new(&backend.path).is_relative() {
                backend.path = base.join(&backend.path).to_string_lossy().into_owned();
            }
        }
        Ok(config)
    }

    /// Parses config text, expanding `${VAR}` through `env`.
    pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut value: toml::Value = toml::from_str(text).context("invalid TOML")?;
        expand_env(&mut value, &env)?;
        let mut config: WharfConfig = value.try_into().context("invalid configuration")?;
        if config.server.store_url.is_none() {
            config.server.store_url = config.store.url.clone();
        }
        for (name, backend) in &config.backends {
            if backend.limits.pool_max == 0 || backend.limits.pool_min > backend.limits.pool_max {
                bail!("backend `{name}`: limits need 1 <= pool_max and pool_min <= pool_max");
            }
            backend
                .grants
                .validate()
                .map_err(|e| anyhow::anyhow!("backend `{name}`: {e}"))?;
        }
        Ok(config)
    }
}

fn expand_env(value: &mut toml::Value, env: &impl Fn(&str) -> Option<String>) -> Result<()> {
    match value {
        toml::Value::String(s) => *s = expand_str(s, env)?,
        toml::Value::Array(items) => {
            for item in items {
                expand_env(item, env)?;
            }
        }
        toml::Value::Table(table) => {
            for (_, item) in table.iter_mut() {
                expand_env(item, env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Replaces every `${NAME}` in `s`; `$${` escapes a literal `${`.
fn expand_str(s: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                bail!("unterminated `${{` in `{s}`");
            };
            let name = &after[..end];
            match env(name) {
                Some(v) => out.push_str(&v),
                None => {
                    bail!("environment variable `{name}` is not set (referenced as `${{{name}}}`)")
                }
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Converts a TOML value to JSON (the backend's config is JSON on the wire).
pub fn toml_to_json(value: &toml::Value) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn expands_env_and_fails_on_unset() {
        let c = WharfConfig::parse(
            "[backends.echo]\npath = \"echo.wasm\"\nconfig = { token = \"${TOKEN}\", price = \"$5\", lit = \"$${TOKEN}\" }\n",
            env,
        )
        .unwrap();
        let cfg = toml_to_json(c.backends["echo"].config.as_ref().unwrap());
        assert_eq!(cfg["token"], "s3cret");
        assert_eq!(cfg["price"], "$5");
        assert_eq!(cfg["lit"], "${TOKEN}");
        let err = WharfConfig::parse("[backends.echo]\npath = \"${NOPE}\"\n", env).unwrap_err();
        assert!(format!("{err:#}").contains("`NOPE` is not set"), "{err:#}");
    }

    #[test]
    fn defaults_and_validation() {
        let c = WharfConfig::parse("", env).unwrap();
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:7420");
        assert!(
            WharfConfig::parse(
                "[backends.x]\npath = \"x.wasm\"\nlimits = { pool_max = 0 }\n",
                env
            )
            .is_err()
        );
        assert!(WharfConfig::parse("[backends.x]\npath = \"x.wasm\"\nbogus = 1\n", env).is_err());
    }
}

//! `wharf.toml`: the server, and one table per backend (path, enabled, config, limits,
//! session lifetimes). `${VAR}` in any string is replaced from the environment; a variable
//! that is not set is a start-up error, never an empty string.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod quotas;
pub use quotas::{MAX_POOL_RESERVE_MS, QuotaConfig, QuotaLimits};
mod auth;
mod backend;
mod connections;
mod env_expansion;
mod oauth;
mod oci;
mod telemetry;
pub use auth::{AuthConfig, RESERVED_TOKEN_NAMES, TokenConfig, TokenScope};
pub use backend::{
    BackendConfig, Limits, OnIdle, OnPausedTtl, SessionLimits, ToolSettings, WarmPoolConfig,
};
pub use connections::ConnectionLimits;
use env_expansion::expand_env;
pub use oauth::{MAX_TOKEN_BYTES, OAuthConfig, OAuthScopes, is_secure_or_loopback};
pub use oci::{OciSettings, OciSource, RegistryCredentials};
pub use telemetry::TelemetryConfig;

/// The prefix of a backend `path` that is an OCI reference.
pub const OCI_PREFIX: &str = "oci://";

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
    /// Bearer tokens (`[[auth.tokens]]`).
    #[serde(default)]
    pub auth: AuthConfig,
    /// The audit sink (`[audit]`).
    #[serde(default)]
    pub audit: crate::audit::AuditConfig,
    /// Per-tenant quotas (`[quotas]`, or `[server.quotas]`).
    #[serde(default)]
    pub quotas: QuotaConfig,
    /// OCI registries (`[oci]`).
    #[serde(default)]
    pub oci: OciSettings,
    /// Trace export (`[telemetry]`).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
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
    /// Place the sandbox agent (`wharf-sandboxd`) as PID 1 of every container the host
    /// creates (default `true`; on a remote engine it is copied into each container and
    /// reached through the engine): commands and background processes then go through it. `false` runs containers as the image says, commands through the
    /// engine's exec, and no background processes.
    pub sandbox_agent: bool,
    /// The engine runtime of each isolation level beyond `container` (`[server.runtimes]
    /// gvisor = "runsc"`); a level with none is refused (4030) when a session asks for it.
    pub runtimes: std::collections::BTreeMap<String, String>,
    /// Names the sandboxes' egress proxy resolves to fixed addresses instead of asking the
    /// host's resolver (`[server.egress_resolve] "pypi.internal" = ["10.0.0.5"]`): a hosts
    /// file for sandbox egress. The addresses are checked like any other.
    pub egress_resolve: std::collections::BTreeMap<String, Vec<std::net::IpAddr>>,
    /// Where previews of sandbox ports are served (a listener of its own: a sandbox's page
    /// never shares the API's origin); none when unset.
    pub preview_listen: Option<SocketAddr>,
    /// When set, each preview is its own origin `{port}-{session}.{preview_domain}` (Host
    /// routing; the names must resolve to the preview listener); unset, previews are
    /// `/{session}/{port}/` paths on the preview listener.
    pub preview_domain: Option<String>,
    /// The state store: `sqlite://PATH` or `postgres://…`; the SQLite file `wharf.db`
    /// in the data dir when unset.
    pub store_url: Option<String>,
    /// Bearer tokens (`[[server.auth.tokens]]`, or `[[auth.tokens]]` at the top level).
    pub auth: AuthConfig,
    /// Names (beyond `localhost` and the loopback addresses) a request's `Host` may carry
    /// when the server listens on loopback, e.g. a name in `/etc/hosts`.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) allowed beyond the server's own.
    pub allowed_origins: Vec<String>,
    /// How long a node's lease lasts without renewal, in s: on itself (heartbeat) and on a
    /// session row it is creating or releasing. A node dead that long is known dead.
    pub lease_seconds: u64,
    /// How often the sweeper finishes abandoned session rows and reaps orphaned
    /// containers, in s.
    pub sweep_interval_seconds: u64,
    /// Largest output a guest's exec buffers per stream, and largest file a guest copies
    /// out of a container, in bytes: what a guest asks for beyond it is clamped to it.
    pub max_guest_buffer_bytes: u64,
    /// Largest upload on the files route, in bytes (4013 beyond).
    pub max_upload_bytes: u64,
    /// Longest wait for the next piece of an upload's body, in ms (5006 beyond); also how
    /// long a download waits for its client to take the next slice before it ends and
    /// gives the session back.
    pub upload_read_timeout_ms: u64,
    /// Bytes one tenant's uploads may have spooled to disk at once (4290 beyond).
    pub max_spooled_bytes_per_tenant: u64,
    /// Per-tenant quotas (`[quotas]` at the top level is the same table).
    pub quotas: QuotaConfig,
    /// OCI registries (`[oci]`, or `[server.oci]`).
    pub oci: OciSettings,
    /// What the listener and the MCP transport hold for callers (`[server.connections]`).
    pub connections: ConnectionLimits,
}

/// The bounds of `lease_seconds` and `sweep_interval_seconds`.
pub const PERIOD_SECONDS: std::ops::RangeInclusive<u64> = 1..=86_400;

impl ServerConfig {
    /// The node and session lease, kept within [`PERIOD_SECONDS`].
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.lease_seconds
                .clamp(*PERIOD_SECONDS.start(), *PERIOD_SECONDS.end()),
        )
    }

    /// The sweep period, kept within [`PERIOD_SECONDS`].
    pub fn sweep_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.sweep_interval_seconds
                .clamp(*PERIOD_SECONDS.start(), *PERIOD_SECONDS.end()),
        )
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7420)),
            data_dir: PathBuf::from(".wharf"),
            max_body_bytes: 4 * 1024 * 1024,
            default_call_timeout_ms: 30_000,
            docker_host: None,
            sandbox_agent: true,
            runtimes: std::collections::BTreeMap::new(),
            egress_resolve: std::collections::BTreeMap::new(),
            preview_listen: None,
            preview_domain: None,
            store_url: None,
            auth: AuthConfig::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            lease_seconds: 30,
            sweep_interval_seconds: 15,
            max_guest_buffer_bytes: crate::bounded::DEFAULT_GUEST_BUFFER_BYTES,
            max_upload_bytes: 1 << 30,
            upload_read_timeout_ms: 30_000,
            max_spooled_bytes_per_tenant: 2 << 30,
            quotas: QuotaConfig::default(),
            oci: OciSettings::default(),
            connections: ConnectionLimits::default(),
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
            if !backend.path.starts_with("bundled:")
                && !backend.is_oci()
                && Path::new(&backend.path).is_relative()
            {
                backend.path = base.join(&backend.path).to_string_lossy().into_owned();
            }
        }
        // Key files, like backend files, are named relative to the config file.
        for key in &mut config.server.oci.signature_keys {
            if !key.contains("-----BEGIN") && Path::new(key.as_str()).is_relative() {
                *key = base.join(key.as_str()).to_string_lossy().into_owned();
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
        if config.server.auth.is_open() {
            config.server.auth = config.auth.clone();
        }
        if config.server.oci == OciSettings::default() {
            config.server.oci = config.oci.clone();
        }
        config.server.auth.validate()?;
        config.server.connections.validate()?;
        config.audit.validate()?;
        config.telemetry.validate()?;
        if config.server.quotas.is_empty() {
            config.server.quotas = config.quotas.clone();
        }
        config.server.quotas.validate(
            config.server.auth.tokens.iter().map(|t| t.name.as_str()),
            config.server.auth.oauth.is_some(),
        )?;
        for (key, value) in [
            ("lease_seconds", config.server.lease_seconds),
            (
                "sweep_interval_seconds",
                config.server.sweep_interval_seconds,
            ),
        ] {
            if !PERIOD_SECONDS.contains(&value) {
                bail!(
                    "server.{key} = {value}: must be between {} and {}",
                    PERIOD_SECONDS.start(),
                    PERIOD_SECONDS.end()
                );
            }
        }
        for token in &config.server.auth.tokens {
            if token.resolved_value().is_none() {
                bail!(
                    "token `{}` has no value (set `value` or a readable `value_file`)",
                    token.name
                );
            }
        }
        for (name, backend) in &config.backends {
            backend
                .validate()
                .map_err(|e| anyhow::anyhow!("backend `{name}`: {e}"))?;
        }
        Ok(config)
    }
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
        let echo_config = |config: &str| {
            let c = WharfConfig::parse(
                &format!("[backends.echo]\npath = \"echo.wasm\"\nconfig = {config}\n"),
                env,
            )
            .unwrap();
            toml_to_json(c.backends["echo"].config.as_ref().unwrap())
        };
        let cfg = echo_config(r#"{ token = "${TOKEN}", price = "$5", lit = "$${TOKEN}" }"#);
        assert_eq!(cfg["token"], "s3cret");
        assert_eq!(cfg["price"], "$5");
        assert_eq!(cfg["lit"], "${TOKEN}");
        // A granted secret's reference is the backend's to read, not an env variable.
        let cfg = echo_config(r#"{ auth = "Bearer ${secret:api} ${TOKEN}" }"#);
        assert_eq!(cfg["auth"], "Bearer ${secret:api} s3cret");
        let err = WharfConfig::parse("[backends.echo]\npath = \"${NOPE}\"\n", env).unwrap_err();
        assert!(format!("{err:#}").contains("`NOPE` is not set"), "{err:#}");
    }

    #[test]
    fn a_warm_pool_past_the_container_grant_is_refused() {
        let err = WharfConfig::parse(
            "[backends.x]\npath = \"x.wasm\"\nwarm_pool = { size = 300000 }\ngrants = { max_containers = 2 }\n",
            env,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("max_containers = 2"), "{err:#}");
        WharfConfig::parse(
            "[backends.x]\npath = \"x.wasm\"\nwarm_pool = { size = 2 }\ngrants = { max_containers = 2 }\n",
            env,
        )
        .unwrap();
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

    #[test]
    fn token_names_are_unique_plain_and_not_reserved() {
        let with = |names: &[&str]| {
            let tokens: String = names
                .iter()
                .map(|n| {
                    format!(
                        "[[auth.tokens]]\nname = \"{n}\"\nvalue = \"v-{n}\"\nscopes = [\"read\"]\n"
                    )
                })
                .collect();
            WharfConfig::parse(&tokens, env)
        };
        assert!(with(&["agent", "ops.team_1-b"]).is_ok());
        for bad in [
            &["*"][..],
            &["anonymous"],
            &[""],
            &["a b"],
            &["line\\nbreak"],
            &["agent", "agent"],
        ] {
            let err = with(bad).expect_err("refused");
            assert!(
                format!("{err:#}").contains("token name"),
                "{bad:?}: {err:#}"
            );
        }
    }

    #[test]
    fn lease_and_sweep_period_are_bounded() {
        let c = WharfConfig::parse("", env).unwrap();
        assert_eq!(c.server.lease(), std::time::Duration::from_secs(30));
        assert_eq!(
            c.server.sweep_interval(),
            std::time::Duration::from_secs(15)
        );
        let short = WharfConfig::parse(
            "[server]\nlease_seconds = 2\nsweep_interval_seconds = 1\n",
            env,
        )
        .unwrap();
        assert_eq!(short.server.lease(), std::time::Duration::from_secs(2));
        for bad in [
            "lease_seconds = 0",
            "sweep_interval_seconds = 0",
            "lease_seconds = 18446744073709551615",
        ] {
            assert!(
                WharfConfig::parse(&format!("[server]\n{bad}\n"), env).is_err(),
                "{bad}"
            );
        }
        let built_in_code = ServerConfig {
            lease_seconds: u64::MAX,
            sweep_interval_seconds: 0,
            ..ServerConfig::default()
        };
        assert_eq!(
            built_in_code.lease(),
            std::time::Duration::from_secs(86_400)
        );
        assert_eq!(
            built_in_code.sweep_interval(),
            std::time::Duration::from_secs(1)
        );
    }
}

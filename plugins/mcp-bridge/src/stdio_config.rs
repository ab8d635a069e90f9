//! The stdio transport's part of the config: the server's image, argv and environment
//! (`${secret:NAME}` in a value, as in HTTP headers), its container's network and limits.

use crate::config::{BridgeConfig, Piece, fill, parse_template};
use std::time::Duration;
use wharf_sdk::host::container::Network;
use wharf_sdk::host::sandboxing::SandboxOptions;
use wharf_sdk::{Deserialize, JsonSchema, ToolError};

/// The most arguments of a command.
pub const MAX_ARGS: usize = 64;
/// The most bytes of one argument, of an env value, of the image reference.
const MAX_ARG_BYTES: usize = 8192;
/// The most environment variables.
const MAX_ENV: usize = 64;
/// The default memory limit, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 512;
/// The default CPU limit, thousandths of a core.
pub const DEFAULT_CPU_MILLIS: u32 = 1000;
/// The default process limit.
pub const DEFAULT_PIDS_LIMIT: u32 = 128;

/// Whether a config sets a field.
pub type IsSet = fn(&BridgeConfig) -> bool;

/// The stdio-only fields and whether a config sets them (refused for HTTP).
pub const STDIO_ONLY: [(&str, IsSet); 13] = [
    ("image", |c| c.image.is_some()),
    ("command", |c| c.command.is_some()),
    ("env", |c| c.env.is_some()),
    ("network", |c| c.network.is_some()),
    ("keep_alive_command", |c| c.keep_alive_command.is_some()),
    ("memory_mb", |c| c.memory_mb.is_some()),
    ("cpu_millis", |c| c.cpu_millis.is_some()),
    ("pids_limit", |c| c.pids_limit.is_some()),
    ("sessions", |c| c.sessions.is_some()),
    ("isolation", |c| c.isolation.is_some()),
    ("user", |c| c.user.is_some()),
    ("allow_egress_to", |c| c.allow_egress_to.is_some()),
    ("allow_egress_to_cidrs", |c| {
        c.allow_egress_to_cidrs.is_some()
    }),
];
/// The most entries of `allow_egress_to` and of `allow_egress_to_cidrs` (the host's bound).
pub const MAX_EGRESS_ENTRIES: usize = 64;
/// The most bytes of one egress entry, of `isolation` and of `user`.
const MAX_NAME_BYTES: usize = 260;

/// How many servers run: one for the backend, or one per Wharf session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionsMode {
    /// One server every instance and session shares (the default).
    #[default]
    Shared,
    /// One server per Wharf session, in a container of the session's own, started by the
    /// session's `initialize` and removed by its `cleanup`. The shared server still runs,
    /// for the listing only; every tool needs a session.
    PerSession,
}

/// The network of the server's container.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkConfig {
    /// No network at all (the default).
    #[default]
    None,
    /// The engine's default bridge (granted by `grants.networks = ["bridge"]`).
    Bridge,
    /// A named network among the operator's `grants.networks`.
    Named(String),
}

impl NetworkConfig {
    /// The container spec's network.
    pub fn to_spec(&self) -> Network {
        match self {
            NetworkConfig::None => Network::None,
            NetworkConfig::Bridge => Network::Bridge,
            NetworkConfig::Named(name) => Network::Named(name.clone()),
        }
    }
}

/// A configured environment variable, its value parsed into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvTemplate {
    /// The variable's name.
    pub name: String,
    /// The value's pieces.
    pub pieces: Vec<Piece>,
}

/// The stdio config, checked.
#[derive(Debug, Clone)]
pub struct StdioSettings {
    /// The container's image.
    pub image: String,
    /// The server's argv.
    pub command: Vec<String>,
    /// The server's environment.
    pub env: Vec<EnvTemplate>,
    /// The container's network.
    pub network: NetworkConfig,
    /// The container's own command; `None` keeps the image's.
    pub keep_alive_command: Option<Vec<String>>,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// CPU limit, thousandths of a core.
    pub cpu_millis: u32,
    /// Process limit.
    pub pids_limit: u32,
    /// The longest a call may take.
    pub timeout: Duration,
    /// One server for the backend, or one per session.
    pub sessions: SessionsMode,
    /// What the container gets beyond its spec (isolation, user, egress by name); `None`
    /// when the config asks none of it.
    pub sandbox: Option<SandboxOptions>,
}

/// A short text field: at most `MAX_NAME_BYTES` bytes, no control character.
fn short_text(field: &str, text: &str) -> Result<(), ToolError> {
    if text.is_empty() || text.len() > MAX_NAME_BYTES || text.chars().any(char::is_control) {
        return Err(ToolError::invalid_input(format!(
            "`{field}`: each value must be 1 to {MAX_NAME_BYTES} bytes with no control character"
        )));
    }
    Ok(())
}

/// The sandbox options a config asks (the host checks them against the grants).
fn sandbox_options(config: &BridgeConfig) -> Result<Option<SandboxOptions>, ToolError> {
    let hosts = config.allow_egress_to.clone().unwrap_or_default();
    let cidrs = config.allow_egress_to_cidrs.clone().unwrap_or_default();
    for (field, list) in [
        ("allow_egress_to", &hosts),
        ("allow_egress_to_cidrs", &cidrs),
    ] {
        if list.len() > MAX_EGRESS_ENTRIES {
            return Err(ToolError::invalid_input(format!(
                "`{field}` has {} entries, at most {MAX_EGRESS_ENTRIES} are accepted",
                list.len()
            )));
        }
        for entry in list {
            short_text(field, entry)?;
        }
    }
    if (!hosts.is_empty() || !cidrs.is_empty())
        && !matches!(config.network, None | Some(NetworkConfig::None))
    {
        return Err(ToolError::invalid_input(
            "`allow_egress_to` gives the server the host's egress proxy and no network of its own: `network` must be \"none\" (or unset)",
        ));
    }
    for (field, value) in [("isolation", &config.isolation), ("user", &config.user)] {
        if let Some(value) = value {
            short_text(field, value)?;
        }
    }
    if config.isolation.is_none() && config.user.is_none() && hosts.is_empty() && cidrs.is_empty() {
        return Ok(None);
    }
    Ok(Some(SandboxOptions {
        isolation: config.isolation.clone(),
        user: config.user.clone(),
        allow_egress_to: hosts,
        allow_egress_to_cidrs: cidrs,
    }))
}

fn check_argv(field: &str, argv: &[String]) -> Result<(), ToolError> {
    if argv.is_empty() || argv.len() > MAX_ARGS {
        return Err(ToolError::invalid_input(format!(
            "`{field}` must have 1 to {MAX_ARGS} arguments, it has {}",
            argv.len()
        )));
    }
    if argv[0].trim().is_empty() {
        return Err(ToolError::invalid_input(format!(
            "`{field}`: the program (its first argument) is empty"
        )));
    }
    for (i, arg) in argv.iter().enumerate() {
        if arg.contains('\0') || arg.len() > MAX_ARG_BYTES {
            return Err(ToolError::invalid_input(format!(
                "`{field}`: argument {i} has a NUL byte or is over {MAX_ARG_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    (1..=256).contains(&name.len())
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn no_nul(text: &str) -> bool {
    !text.contains('\0')
}

fn positive<T: PartialEq + Default + Copy>(
    field: &str,
    value: Option<T>,
    default: T,
) -> Result<T, ToolError> {
    match value {
        Some(v) if v == T::default() => Err(ToolError::invalid_input(format!(
            "`{field}` must be above 0"
        ))),
        Some(v) => Ok(v),
        None => Ok(default),
    }
}

impl StdioSettings {
    /// The stdio settings of a config whose transport is `stdio`.
    pub fn from_checked(config: &BridgeConfig, timeout: Duration) -> Result<Self, ToolError> {
        let image = config.image.as_deref().map(str::trim).unwrap_or("");
        if image.is_empty() {
            return Err(ToolError::invalid_input(
                "`\"transport\": \"stdio\"` needs `image`, the server's container image",
            ));
        }
        if image.len() > 512 || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ToolError::invalid_input(
                "`image` must be an image reference (at most 512 characters, no spaces)",
            ));
        }
        let Some(command) = config.command.clone() else {
            return Err(ToolError::invalid_input(
                "`\"transport\": \"stdio\"` needs `command`, the server's argv, e.g. [\"/usr/bin/python3\", \"/srv/server.py\"]",
            ));
        };
        check_argv("command", &command)?;
        if let Some(keep) = &config.keep_alive_command {
            check_argv("keep_alive_command", keep)?;
        }
        let env_map = config.env.clone().unwrap_or_default();
        if env_map.len() > MAX_ENV {
            return Err(ToolError::invalid_input(format!(
                "`env` has {} variables, at most {MAX_ENV} are accepted",
                env_map.len()
            )));
        }
        let mut env = Vec::with_capacity(env_map.len());
        for (name, value) in env_map {
            if !is_env_name(&name) {
                return Err(ToolError::invalid_input(format!(
                    "`env`: `{}` is not a variable name (A-Z a-z 0-9 _, not starting with a digit)",
                    name.escape_debug()
                )));
            }
            if !no_nul(&value) || value.len() > MAX_ARG_BYTES {
                return Err(ToolError::invalid_input(format!(
                    "env `{name}`: the value has a NUL byte or is over {MAX_ARG_BYTES} bytes"
                )));
            }
            let pieces = parse_template(&format!("env `{name}`"), &value)?;
            env.push(EnvTemplate { name, pieces });
        }
        if let Some(NetworkConfig::Named(name)) = &config.network
            && (name.is_empty() || name.len() > 256 || name.chars().any(char::is_control))
        {
            return Err(ToolError::invalid_input(
                "`network`: `named` needs a network name",
            ));
        }
        let memory_mb = positive("memory_mb", config.memory_mb, DEFAULT_MEMORY_MB)?;
        if memory_mb > 1 << 20 {
            return Err(ToolError::invalid_input(
                "`memory_mb` is at most 1048576 (1 TiB)",
            ));
        }
        Ok(Self {
            image: image.to_string(),
            command,
            env,
            network: config.network.clone().unwrap_or_default(),
            keep_alive_command: config.keep_alive_command.clone(),
            memory_bytes: memory_mb << 20,
            cpu_millis: positive("cpu_millis", config.cpu_millis, DEFAULT_CPU_MILLIS)?,
            pids_limit: positive("pids_limit", config.pids_limit, DEFAULT_PIDS_LIMIT)?,
            timeout,
            sessions: config.sessions.unwrap_or_default(),
            sandbox: sandbox_options(config)?,
        })
    }

    /// The environment with its secrets read through `secret`. An error names the
    /// variable and the secret, never a value.
    pub fn resolve_env(
        &self,
        secret: &mut dyn FnMut(&str) -> Result<String, ToolError>,
    ) -> Result<Vec<(String, String)>, ToolError> {
        self.env
            .iter()
            .map(|v| {
                let value = fill(
                    &format!("env `{}`", v.name),
                    &v.pieces,
                    secret,
                    no_nul,
                    "holds a NUL byte, which an environment variable cannot carry",
                )?;
                Ok((v.name.clone(), value))
            })
            .collect()
    }

    /// What identifies the server this config runs (its container and process): a hash
    /// of everything but the timeout, secret names and not their values. 16 hex digits.
    pub fn fingerprint(&self) -> String {
        let mut text = format!(
            "{}\n{:?}\n{:?}\n{:?}\n{}/{}/{}\n",
            self.image,
            self.command,
            self.network,
            self.keep_alive_command,
            self.memory_bytes,
            self.cpu_millis,
            self.pids_limit
        );
        for v in &self.env {
            text.push_str(&format!("{}={:?}\n", v.name, v.pieces));
        }
        if let Some(o) = &self.sandbox {
            text.push_str(&format!(
                "sandbox {:?} {:?} {:?} {:?}\n",
                o.isolation, o.user, o.allow_egress_to, o.allow_egress_to_cidrs
            ));
        }
        // FNV-1a: stable across builds and instances (no random seed), not a secret.
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{hash:016x}")
    }
}

#[cfg(test)]
#[path = "stdio_config_tests.rs"]
mod tests;

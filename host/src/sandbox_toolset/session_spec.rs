//! The session config of a provider session: what sandbox to provision. Anything the
//! provider cannot enforce is refused by the provider (never a weaker sandbox than asked).

use crate::error_code::{Code, WharfError};
use crate::policy::{Isolation, check_user};
use crate::runtime::guest_types::{NetworkPolicy, SandboxSpec};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecConfig {
    image: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    network: Option<NetworkConfig>,
    cpu_millis: Option<u32>,
    memory_bytes: Option<u64>,
    lifetime_seconds: Option<u32>,
    workdir: Option<String>,
    isolation: Option<String>,
    user: Option<String>,
    #[serde(default)]
    read_only_root: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkConfig {
    #[serde(default = "yes")]
    block_network: bool,
    #[serde(default)]
    allow_egress_to: Vec<String>,
    #[serde(default)]
    allow_egress_to_cidrs: Vec<String>,
}

fn yes() -> bool {
    true
}

/// JSON Schema of the session config.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "image": {"type": "string"},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "network": {"type": "object", "additionalProperties": false, "properties": {
                "block_network": {"type": "boolean", "default": true},
                "allow_egress_to": {"type": "array", "items": {"type": "string"}},
                "allow_egress_to_cidrs": {"type": "array", "items": {"type": "string"}}
            }},
            "cpu_millis": {"type": "integer", "minimum": 1},
            "memory_bytes": {"type": "integer", "minimum": 1},
            "lifetime_seconds": {"type": "integer", "minimum": 1},
            "workdir": {"type": "string"},
            "isolation": {"type": "string", "enum": ["container", "gvisor"],
                "description": "How the sandbox is kept from the host's kernel; the backend's first granted level when unset. A level the grants or the engine cannot give is refused (4030)."},
            "user": {"type": "string", "maxLength": crate::policy::MAX_USER_BYTES,
                "description": "Who the sandbox's processes run as: a name or uid, optionally `:group`."},
            "read_only_root": {"type": "boolean", "default": false,
                "description": "Mount the root filesystem read-only; the work dir and /tmp stay writable."}
        }
    })
}

/// The spec to provision from a session config (`null` = defaults: no network).
pub fn sandbox_spec(
    config: &Value,
    owner: Option<String>,
    max_lifetime_seconds: u64,
) -> Result<SandboxSpec, WharfError> {
    let c: SpecConfig = if config.is_null() {
        SpecConfig::default()
    } else {
        serde_json::from_value(config.clone()).map_err(|e| {
            WharfError::new(Code::InvalidType, format!("invalid sandbox config: {e}"))
        })?
    };
    let network = c.network.unwrap_or(NetworkConfig {
        block_network: true,
        allow_egress_to: vec![],
        allow_egress_to_cidrs: vec![],
    });
    let isolation = c
        .isolation
        .map(|name| {
            Isolation::parse(&name).ok_or_else(|| {
                WharfError::new(
                    Code::InvalidType,
                    format!(
                        "invalid sandbox config: unknown isolation {:?} (container, gvisor)",
                        name.chars().take(64).collect::<String>()
                    ),
                )
            })
        })
        .transpose()?;
    if let Some(user) = &c.user {
        check_user(user).map_err(|e| {
            WharfError::new(Code::InvalidType, format!("invalid sandbox config: {e}"))
        })?;
    }
    let lifetime = match (c.lifetime_seconds, max_lifetime_seconds) {
        (Some(asked), 0) => Some(asked),
        (Some(asked), max) => Some(asked.min(max.min(u32::MAX as u64) as u32)),
        (None, 0) => None,
        (None, max) => Some(max.min(u32::MAX as u64) as u32),
    };
    Ok(SandboxSpec {
        image: c.image,
        env: c.env.into_iter().collect(),
        network: NetworkPolicy {
            block_network: network.block_network,
            allow_egress_to: network.allow_egress_to,
            allow_egress_to_cidrs: network.allow_egress_to_cidrs,
        },
        cpu_millis: c.cpu_millis,
        memory_bytes: c.memory_bytes,
        lifetime_seconds: lifetime,
        owner,
        workdir: c.workdir,
        isolation,
        user: c.user,
        read_only_root: c.read_only_root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_block_the_network() {
        let s = sandbox_spec(&Value::Null, None, 0).unwrap();
        assert!(s.network.block_network);
        assert_eq!(s.lifetime_seconds, None);
        let s = sandbox_spec(
            &json!({"image": "x", "lifetime_seconds": 900}),
            Some("me".into()),
            600,
        )
        .unwrap();
        assert_eq!(s.lifetime_seconds, Some(600));
        assert_eq!(s.owner.as_deref(), Some("me"));
        assert_eq!(
            sandbox_spec(&json!({"bogus": 1}), None, 0)
                .unwrap_err()
                .code,
            Code::InvalidType
        );
        let s = sandbox_spec(
            &json!({"isolation": "gvisor", "user": "1000:1000", "read_only_root": true}),
            None,
            0,
        )
        .unwrap();
        assert_eq!(s.isolation, Some(Isolation::Gvisor));
        assert_eq!(s.user.as_deref(), Some("1000:1000"));
        assert!(s.read_only_root);
        for bad in [
            json!({"isolation": "vm"}),
            json!({"user": "../root"}),
            json!({"user": "a b"}),
        ] {
            assert_eq!(
                sandbox_spec(&bad, None, 0).unwrap_err().code,
                Code::InvalidType
            );
        }
    }
}

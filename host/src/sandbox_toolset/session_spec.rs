//! The session config of a provider session: what sandbox to provision. Anything the
//! provider cannot enforce is refused by the provider (never a weaker sandbox than asked).

use crate::error_code::{Code, WharfError};
use crate::policy::check_asked;
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
    #[serde(default)]
    expose_ports: Vec<u16>,
    #[serde(default)]
    volumes: Vec<VolumeAsk>,
}

/// One of the tenant's named volumes a session config mounts (`volumes: [{name, path,
/// read_only}]`); the host resolves the name within the caller's tenant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeAsk {
    /// The tenant's name for the volume.
    pub name: String,
    /// Absolute path in the sandbox.
    pub path: String,
    /// Mount it read-only.
    #[serde(default)]
    pub read_only: bool,
}

/// The most volumes one session mounts.
pub const MAX_SESSION_VOLUMES: usize = 8;

/// The longest mount path of a volume.
const MAX_VOLUME_PATH_BYTES: usize = 256;

/// Paths a volume never covers: the kernel's and the engine's (the sandbox agent lives
/// under `/.wharf*`).
const RESERVED_PATHS: &[&str] = &["/proc", "/sys", "/dev", "/etc", "/.wharf"];

/// The volumes a session config mounts, checked (at most [`MAX_SESSION_VOLUMES`], valid
/// names, plain absolute paths outside the reserved ones, no path twice, no volume twice).
pub fn volume_asks(config: &Value) -> Result<Vec<VolumeAsk>, WharfError> {
    config_list(config, "volumes", check_volumes)
}

/// A session config the toolset refuses, saying what is wrong with it.
fn invalid(what: impl std::fmt::Display) -> WharfError {
    WharfError::new(Code::InvalidType, format!("invalid sandbox config: {what}"))
}

/// The list under `key` of a session config, checked by `check`; empty when absent.
fn config_list<T: serde::de::DeserializeOwned>(
    config: &Value,
    key: &str,
    check: fn(&[T]) -> Result<(), WharfError>,
) -> Result<Vec<T>, WharfError> {
    let Some(list) = config.get(key) else {
        return Ok(Vec::new());
    };
    let list: Vec<T> =
        serde_json::from_value(list.clone()).map_err(|e| invalid(format!("{key}: {e}")))?;
    check(&list)?;
    Ok(list)
}

fn check_volumes(asks: &[VolumeAsk]) -> Result<(), WharfError> {
    if asks.len() > MAX_SESSION_VOLUMES {
        return Err(invalid(format!(
            "volumes: at most {MAX_SESSION_VOLUMES} per session"
        )));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut paths = std::collections::BTreeSet::new();
    for ask in asks {
        if !crate::volume_record::is_volume_name(&ask.name) {
            return Err(invalid(format!(
                "volumes: {:?} is not a volume name",
                ask.name.chars().take(80).collect::<String>()
            )));
        }
        let path = ask.path.trim_end_matches('/');
        let plain = path.starts_with('/')
            && path.len() <= MAX_VOLUME_PATH_BYTES
            && path
                .split('/')
                .skip(1)
                .all(|part| !part.is_empty() && part != "." && part != "..")
            && !path.chars().any(|c| c.is_control() || c == ':' || c == ',');
        // `/.wharf` covers every `/.wharf…` name; the others, themselves and what is below.
        let reserved = path.starts_with("/.wharf")
            || RESERVED_PATHS
                .iter()
                .any(|r| path == *r || path.starts_with(&format!("{r}/")));
        if !plain || reserved {
            return Err(invalid(format!(
                "volumes: mount path {:?} must be a plain absolute path (no `.`, `..` or `//`), not `/` and not under {}",
                ask.path.chars().take(80).collect::<String>(),
                RESERVED_PATHS.join(", ")
            )));
        }
        if !names.insert(ask.name.as_str()) || !paths.insert(path) {
            return Err(invalid(format!(
                "volumes: `{}` or its path is given twice",
                ask.name
            )));
        }
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkConfig {
    /// Unset: blocked, unless an allowlist is given (then egress goes through the host's
    /// proxy to what it lists).
    #[serde(default)]
    block_network: Option<bool>,
    #[serde(default)]
    allow_egress_to: Vec<String>,
    #[serde(default)]
    allow_egress_to_cidrs: Vec<String>,
}

/// The most ports a session may expose.
pub const MAX_EXPOSED_PORTS: usize = 16;

/// The ports a session config exposes for previews, checked (1–65535, at most
/// [`MAX_EXPOSED_PORTS`], no repeats).
pub fn exposed_ports(config: &Value) -> Result<Vec<u16>, WharfError> {
    config_list(config, "expose_ports", check_ports)
}

fn check_ports(ports: &[u16]) -> Result<(), WharfError> {
    if ports.len() > MAX_EXPOSED_PORTS {
        return Err(invalid(format!(
            "expose_ports: at most {MAX_EXPOSED_PORTS} ports"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for port in ports {
        if *port == 0 || !seen.insert(*port) {
            return Err(invalid(format!(
                "expose_ports: bad or repeated port {port}"
            )));
        }
    }
    Ok(())
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
                "block_network": {"type": "boolean",
                    "description": "No network at all (the allowlists are ignored). Unset: true, unless an allowlist is given."},
                "allow_egress_to": {"type": "array", "maxItems": crate::policy::MAX_EGRESS_ENTRIES, "items": {"type": "string", "maxLength": 260},
                    "description": "Names the sandbox may reach through the host's egress proxy: `host`, `host:port`, `*.suffix[:port]` (no port: any). Nothing else is reachable."},
                "allow_egress_to_cidrs": {"type": "array", "maxItems": crate::policy::MAX_EGRESS_ENTRIES, "items": {"type": "string", "maxLength": 64},
                    "description": "Address ranges reachable by address, and where an allowed name may resolve to a private or loopback address."}
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
                "description": "Mount the root filesystem read-only; the work dir and /tmp stay writable."},
            "expose_ports": {"type": "array", "maxItems": MAX_EXPOSED_PORTS, "uniqueItems": true,
                "items": {"type": "integer", "minimum": 1, "maximum": 65535},
                "description": "Ports of the sandbox a person may open through the host's preview listener (by the session's tenant token, or a signed preview URL)."},
            "volumes": {"type": "array", "maxItems": MAX_SESSION_VOLUMES,
                "items": {"type": "object", "additionalProperties": false, "required": ["name", "path"], "properties": {
                    "name": {"type": "string", "maxLength": crate::volume_record::MAX_VOLUME_NAME_BYTES,
                        "description": "One of the tenant's volumes (`POST /v1/volumes`)."},
                    "path": {"type": "string", "maxLength": MAX_VOLUME_PATH_BYTES,
                        "description": "Absolute path in the sandbox."},
                    "read_only": {"type": "boolean", "default": false}
                }},
                "description": "The tenant's named volumes to mount (the backend needs `grants.volumes`); a volume that is not `shared` is mounted by one sandbox at a time."}
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
        serde_json::from_value(config.clone()).map_err(invalid)?
    };
    let network = c.network.unwrap_or(NetworkConfig {
        block_network: None,
        allow_egress_to: vec![],
        allow_egress_to_cidrs: vec![],
    });
    let block_network = network
        .block_network
        .unwrap_or(network.allow_egress_to.is_empty() && network.allow_egress_to_cidrs.is_empty());
    check_ports(&c.expose_ports)?;
    check_volumes(&c.volumes)?;
    let isolation = check_asked(c.isolation.as_deref(), c.user.as_deref()).map_err(invalid)?;
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
            block_network,
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
    use crate::policy::Isolation;

    #[test]
    fn defaults_block_the_network() {
        let s = sandbox_spec(&Value::Null, None, 0).unwrap();
        assert!(s.network.block_network);
        let s = sandbox_spec(&json!({"network": {}}), None, 0).unwrap();
        assert!(s.network.block_network);
        // An allowlist asks for egress through the proxy, unless blocked outright.
        let s = sandbox_spec(
            &json!({"network": {"allow_egress_to": ["a.test"]}}),
            None,
            0,
        )
        .unwrap();
        assert!(!s.network.block_network);
        let s = sandbox_spec(
            &json!({"network": {"allow_egress_to": ["a.test"], "block_network": true}}),
            None,
            0,
        )
        .unwrap();
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
        assert_eq!(
            exposed_ports(&json!({"expose_ports": [8080, 3000]})).unwrap(),
            vec![8080, 3000]
        );
        assert!(exposed_ports(&Value::Null).unwrap().is_empty());
        for bad in [
            json!({"expose_ports": [0]}),
            json!({"expose_ports": [80, 80]}),
            json!({"expose_ports": [70000]}),
            json!({"expose_ports": (1..=17).collect::<Vec<u16>>()}),
        ] {
            assert!(exposed_ports(&bad).is_err(), "{bad}");
        }
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

    #[test]
    fn volumes_mount_plain_absolute_paths_once_each() {
        let asks = volume_asks(&json!({"volumes": [
            {"name": "data", "path": "/data/"},
            {"name": "cache", "path": "/home/u/.cache", "read_only": true}
        ]}))
        .unwrap();
        assert_eq!(asks.len(), 2);
        assert!(asks[1].read_only && !asks[0].read_only);
        assert!(volume_asks(&json!({})).unwrap().is_empty());
        for bad in [
            json!([{"name": "d", "path": "rel"}]),
            json!([{"name": "d", "path": "/"}]),
            json!([{"name": "d", "path": "/a/../b"}]),
            json!([{"name": "d", "path": "/a//b"}]),
            json!([{"name": "d", "path": "/a/./b"}]),
            json!([{"name": "d", "path": "/proc"}]),
            json!([{"name": "d", "path": "/sys/fs"}]),
            json!([{"name": "d", "path": "/.wharf-snapshot-work"}]),
            json!([{"name": "d", "path": "/a,b"}]),
            json!([{"name": "d", "path": "/a\nb"}]),
            json!([{"name": "d", "path": "/a"}, {"name": "e", "path": "/a/"}]),
            json!([{"name": "d", "path": "/a"}, {"name": "d", "path": "/b"}]),
            json!([{"name": "../d", "path": "/a"}]),
            json!([{"name": "d", "path": "/a", "size": 1}]),
            json!([{"name": "d"}]),
            json!("d"),
        ] {
            let e = volume_asks(&json!({ "volumes": bad })).unwrap_err();
            assert_eq!(e.code, Code::InvalidType, "{bad}");
        }
        let many: Vec<Value> = (0..=MAX_SESSION_VOLUMES)
            .map(|i| json!({"name": format!("v{i}"), "path": format!("/v{i}")}))
            .collect();
        assert!(volume_asks(&json!({ "volumes": many })).is_err());
        // The whole config is checked the same way.
        assert!(
            sandbox_spec(
                &json!({"volumes": [{"name": "d", "path": "/dev/x"}]}),
                None,
                0
            )
            .is_err()
        );
    }
}

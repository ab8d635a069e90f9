//! The engine's create request for a spec: checked paths, names and limits, the
//! hardening every sandbox gets (capabilities, `no-new-privileges`, a bounded `/tmp` under a
//! read-only root), and the container's readable name. Pure: no engine call.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, Mount as DockerMount, MountType};

use super::error::DockerError;
use super::labels::shorten;
use super::types::{ContainerSpec, Network};

/// Docker's `NetworkMode` for a spec's network; `host` and `container:*` are refused
/// whatever the grants say (they share the host's or another container's namespace).
pub(crate) fn network_mode(network: &Network) -> Result<String, DockerError> {
    match network {
        Network::None => Ok("none".to_string()),
        Network::Bridge => Ok("bridge".to_string()),
        Network::Named(name) => {
            let name = name.trim();
            let lower = name.to_ascii_lowercase();
            if lower == "host" || lower.starts_with("container:") {
                Err(DockerError::Refused(format!(
                    "network {name:?} is never allowed"
                )))
            } else if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                Err(DockerError::Invalid(format!("bad network name {name:?}")))
            } else {
                Ok(name.to_string())
            }
        }
    }
}

/// The capabilities a sandbox keeps; every other one is dropped (SECURITY.md, "Inside a
/// sandbox"). Root in the sandbox still owns its files and runs commands as other users:
/// `CHOWN`, `DAC_OVERRIDE`, `FOWNER` for files of any owner (uploads, package managers),
/// `SETUID`, `SETGID` for the agent's user switching, `KILL` for signalling any of the
/// sandbox's processes, `NET_BIND_SERVICE` for servers on ports below 1024. Dropped from the
/// engine's default set: `NET_RAW` (raw sockets, spoofing), `MKNOD`, `SYS_CHROOT`,
/// `SETPCAP`, `SETFCAP`, `FSETID`, `AUDIT_WRITE`.
pub(crate) const KEPT_CAPABILITIES: [&str; 7] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "SETUID",
    "SETGID",
    "KILL",
    "NET_BIND_SERVICE",
];

/// `/tmp` under a read-only root: writable by all, no devices or set-id programs, 64 MiB.
const READ_ONLY_ROOT_TMP: &str = "rw,nosuid,nodev,mode=1777,size=64m";

fn check_abs_path(what: &str, path: &str) -> Result<(), DockerError> {
    if !path.starts_with('/') || path.contains('\0') || path.chars().any(char::is_control) {
        return Err(DockerError::Invalid(format!(
            "{what} must be an absolute path, got {:?}",
            shorten(path)
        )));
    }
    Ok(())
}

/// The proxy variables of a sandbox whose egress goes through the host's proxy: curl,
/// pip, npm, git, wget and most HTTP clients read one spelling or the other.
fn proxy_variables() -> Vec<String> {
    let proxy = format!("http://127.0.0.1:{}", wharf_sandbox_protocol::EGRESS_PORT);
    let mut vars = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        vars.push(format!("{name}={proxy}"));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        vars.push(format!("{name}=localhost,127.0.0.1,::1"));
    }
    vars
}

/// Whether `KEY=value` sets a proxy variable (the host's win over the caller's).
fn is_proxy_variable(kv: &str) -> bool {
    let key = kv
        .split('=')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    matches!(
        key.as_str(),
        "http_proxy" | "https_proxy" | "no_proxy" | "all_proxy"
    )
}

/// `KEY=value` strings, with the keys checked.
pub(crate) fn env_strings(env: &[(String, String)]) -> Result<Vec<String>, DockerError> {
    env.iter()
        .map(|(k, v)| {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                Err(DockerError::Invalid(format!(
                    "bad environment variable name {:?}",
                    shorten(k)
                )))
            } else {
                Ok(format!("{k}={v}"))
            }
        })
        .collect()
}

/// A readable container name: `wharf-<backend>-<12 hex>`.
pub(crate) fn container_name(backend: &str) -> String {
    let mut clean: String = backend
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    if clean.is_empty() {
        clean.push('x');
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("wharf-{clean}-{}", &suffix[..12])
}

/// A mount of `source` (a host path or a volume name, by `typ`) at `target`.
fn mount(typ: MountType, source: &str, target: &str, read_only: bool) -> DockerMount {
    DockerMount {
        target: Some(target.to_string()),
        source: Some(source.to_string()),
        typ: Some(typ),
        read_only: Some(read_only),
        ..Default::default()
    }
}

pub(crate) fn create_body(
    spec: &ContainerSpec,
    labels: HashMap<String, String>,
) -> Result<ContainerCreateBody, DockerError> {
    let image = spec.image.trim();
    if image.is_empty() || image.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(DockerError::Invalid(format!(
            "bad image reference {:?}",
            shorten(&spec.image)
        )));
    }
    if let Some(cmd) = &spec.command {
        if cmd.is_empty() || cmd[0].is_empty() {
            return Err(DockerError::Invalid("command must not be empty".into()));
        }
        if cmd.iter().any(|a| a.contains('\0')) {
            return Err(DockerError::Invalid("command contains a NUL byte".into()));
        }
    }
    if let Some(dir) = &spec.workdir {
        check_abs_path("workdir", dir)?;
    }
    let mut mounts = Vec::with_capacity(spec.mounts.len());
    for m in &spec.mounts {
        check_abs_path("mount host path", &m.host_path)?;
        check_abs_path("mount container path", &m.container_path)?;
        mounts.push(mount(
            MountType::BIND,
            &m.host_path,
            &m.container_path,
            m.read_only,
        ));
    }
    for v in &spec.volumes {
        check_abs_path("volume container path", &v.container_path)?;
        if v.volume.is_empty() || v.volume.chars().any(|c| c.is_control() || c == '/') {
            return Err(DockerError::Invalid(format!(
                "bad volume name {:?}",
                shorten(&v.volume)
            )));
        }
        mounts.push(mount(
            MountType::VOLUME,
            &v.volume,
            &v.container_path,
            v.read_only,
        ));
    }
    if let Some(vol) = &spec.work_volume {
        check_abs_path("work volume", vol)?;
        if vol.trim_end_matches('/').is_empty() {
            return Err(DockerError::Invalid("work volume cannot be /".into()));
        }
    }
    let memory = spec
        .memory_bytes
        .map(|m| {
            i64::try_from(m).map_err(|_| DockerError::Invalid("memory limit too large".into()))
        })
        .transpose()?;
    // Egress by name: no interface but loopback; the proxy is reached through the agent.
    let network = if spec.egress.is_some() {
        Network::None
    } else {
        spec.network.clone()
    };
    let mut env = env_strings(&spec.env)?;
    if spec.egress.is_some() {
        env.retain(|kv| !is_proxy_variable(kv));
        env.extend(proxy_variables());
    }
    let host_config = HostConfig {
        network_mode: Some(network_mode(&network)?),
        mounts: if mounts.is_empty() {
            None
        } else {
            Some(mounts)
        },
        nano_cpus: spec.cpu_millis.map(|m| i64::from(m) * 1_000_000),
        memory,
        // Same as memory: no swap on top of the limit.
        memory_swap: memory,
        pids_limit: spec.pids_limit.map(i64::from),
        readonly_rootfs: Some(spec.read_only_root),
        // A read-only root keeps a writable, size-bounded /tmp (counted in the memory limit).
        tmpfs: spec
            .read_only_root
            .then(|| HashMap::from([("/tmp".to_string(), READ_ONLY_ROOT_TMP.to_string())])),
        cap_drop: Some(vec!["ALL".to_string()]),
        cap_add: Some(KEPT_CAPABILITIES.iter().map(|c| c.to_string()).collect()),
        security_opt: Some(vec!["no-new-privileges".to_string()]),
        // A real init as PID 1 reaps the processes orphaned when an exec's group is killed;
        // otherwise they linger as zombies and count against the pids limit.
        init: Some(true),
        ..Default::default()
    };
    Ok(ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: spec.command.clone(),
        env: if env.is_empty() { None } else { Some(env) },
        working_dir: spec.workdir.clone(),
        user: spec.user.clone(),
        labels: Some(labels),
        // An anonymous volume declared like `VOLUME`: `remove` (v=true) deletes it.
        volumes: spec.work_volume.clone().map(|v| vec![v]),
        host_config: Some(host_config),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_container_networks_are_refused() {
        assert_eq!(network_mode(&Network::None).ok().as_deref(), Some("none"));
        assert!(matches!(
            network_mode(&Network::Named("host".into())),
            Err(DockerError::Refused(_))
        ));
        assert!(matches!(
            network_mode(&Network::Named("HOST".into())),
            Err(DockerError::Refused(_))
        ));
        assert!(matches!(
            network_mode(&Network::Named("container:abc".into())),
            Err(DockerError::Refused(_))
        ));
        assert_eq!(
            network_mode(&Network::Named("mynet".into()))
                .ok()
                .as_deref(),
            Some("mynet")
        );
    }

    #[test]
    fn specs_are_checked() {
        let invalid = [
            ContainerSpec {
                command: Some(vec![]),
                ..Default::default()
            },
            ContainerSpec {
                work_volume: Some("work".into()),
                ..Default::default()
            },
            ContainerSpec {
                env: vec![("A=B".into(), "c".into())],
                ..Default::default()
            },
        ];
        for spec in invalid {
            let spec = ContainerSpec {
                image: "img".into(),
                ..spec
            };
            assert!(
                matches!(
                    create_body(&spec, HashMap::new()),
                    Err(DockerError::Invalid(_))
                ),
                "{spec:?}"
            );
        }
        let spec = ContainerSpec {
            image: "img".into(),
            cpu_millis: Some(1500),
            memory_bytes: Some(64 << 20),
            read_only_root: true,
            work_volume: Some("/work".into()),
            ..Default::default()
        };
        let body = create_body(&spec, HashMap::new()).unwrap_or_default();
        let hc = body.host_config.unwrap_or_default();
        assert_eq!(hc.nano_cpus, Some(1_500_000_000));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(body.volumes, Some(vec!["/work".to_string()]));
        assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
        assert!(
            !hc.cap_add
                .unwrap_or_default()
                .iter()
                .any(|c| c == "NET_RAW")
        );
        assert_eq!(hc.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert!(hc.tmpfs.unwrap_or_default().contains_key("/tmp"));
        assert!(container_name("my backend!").starts_with("wharf-my-backend--"));
    }
}

//! The sandbox agent in the containers this engine creates: `wharf-sandboxd`, embedded in
//! the `wharf` binary, is written once under the data dir and bind-mounted read-only into
//! every container as its PID 1 (on an engine on another machine, copied into each
//! container through the engine's archive API before it starts) (it reaps orphans, so the engine's `--init` is not used).
//! It listens in a small tmpfs of the container's own (`/.wharf/run`, 64 KiB, counted in the
//! container's memory), which the host reaches through `/proc/<PID 1>/root`: nothing the
//! sandbox writes there lands on the host's disk. Under gVisor the container's files are
//! its own kernel's, out of the host's reach: there the directory is an anonymous volume
//! of the engine's, a 64 KiB tmpfs on the host, and the runtime (`--host-uds=all`)
//! creates the agent's socket in it as a host socket; where the runtime is registered
//! without host sockets, the socket stays in the container's own tmpfs and the host reaches
//! it through an engine link (`agent_link`). The image's own entrypoint and command
//! become the agent's child, so a container behaves as it would without the agent.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, Mount as DockerMount, MountTmpfsOptions, MountType, MountVolumeOptions,
    MountVolumeOptionsDriverConfig,
};
use sha2::{Digest as _, Sha256};
pub(crate) use wharf_sandbox_protocol::SOCKET_NAME;
use wharf_sandbox_protocol::{BINARY_PATH, SOCKET_DIR, SOCKET_PATH};

use super::labels::{LABEL_AGENT, LABEL_USER};

/// The size of the agent's socket directory (a tmpfs: the socket needs none of it).
const SOCKET_DIR_BYTES: i64 = 64 * 1024;

/// Where a container's agent socket lives, as its `wharf.agent` label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketHome {
    /// In a tmpfs of the container's own, reached through `/proc/<PID 1>/root`.
    InContainer,
    /// In a tmpfs volume on the host (gVisor), reached at the volume's mount point.
    OnHost,
    /// In a tmpfs of the container's own, reached through the container's engine link
    /// (`agent_link`): where this host cannot reach the socket.
    ThroughEngine,
}

impl SocketHome {
    /// The `wharf.agent` label's value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            SocketHome::InContainer => "1",
            SocketHome::OnHost => "host",
            SocketHome::ThroughEngine => "engine",
        }
    }

    /// The home a `wharf.agent` label names (`None`: no agent).
    pub(crate) fn from_label(value: &str) -> Option<Self> {
        match value {
            "1" => Some(SocketHome::InContainer),
            "host" => Some(SocketHome::OnHost),
            "engine" => Some(SocketHome::ThroughEngine),
            _ => None,
        }
    }
}

/// Where the agent's binary lives on this host, and how it reaches a container.
#[derive(Debug, Clone)]
pub struct AgentPlacement {
    binary: PathBuf,
    /// The binary's bytes (the build embeds them): what a copy into a container carries,
    /// with no read of the file per container.
    bytes: &'static [u8],
    /// Copied into each container through the engine's archive API (an engine on another
    /// machine), instead of bind-mounted from this host.
    copied: bool,
}

/// The agent's socket of the container whose PID 1 is `pid` (as this host sees it),
/// through that process's root.
pub(crate) fn socket_of(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root{SOCKET_PATH}"))
}

impl AgentPlacement {
    /// Writes the agent's `bytes` under `data_dir/sandboxd/`, named by their hash, so a new
    /// build never overwrites a binary a running container has mounted.
    pub fn install(data_dir: &Path, bytes: &'static [u8]) -> anyhow::Result<Self> {
        if bytes.is_empty() {
            anyhow::bail!("this build carries no sandbox agent");
        }
        let data_dir = std::fs::canonicalize(data_dir)
            .with_context(|| format!("resolving {}", data_dir.display()))?;
        let bin_dir = data_dir.join("sandboxd");
        std::fs::create_dir_all(&bin_dir)
            .with_context(|| format!("creating {}", bin_dir.display()))?;
        let digest = hex::encode(Sha256::digest(bytes));
        let binary = bin_dir.join(format!("wharf-sandboxd-{}", &digest[..16]));
        if std::fs::read(&binary).ok().as_deref() != Some(bytes) {
            let staged = bin_dir.join(format!(".staged-{}", uuid::Uuid::new_v4().simple()));
            std::fs::write(&staged, bytes)
                .with_context(|| format!("writing {}", staged.display()))?;
            set_mode(&staged, 0o755)?;
            std::fs::rename(&staged, &binary)
                .with_context(|| format!("placing {}", binary.display()))?;
        }
        Ok(AgentPlacement {
            binary,
            bytes,
            copied: false,
        })
    }

    /// The same agent, copied into each container through the engine's archive API before
    /// it starts (an engine on another machine cannot mount this host's files); its socket
    /// is then reached through the engine ([`SocketHome::ThroughEngine`]).
    pub(crate) fn copied(self) -> Self {
        AgentPlacement {
            copied: true,
            ..self
        }
    }

    /// Whether the binary is copied into each container ([`AgentPlacement::copied`]).
    pub(crate) fn is_copied(&self) -> bool {
        self.copied
    }

    /// The agent's binary.
    pub(crate) fn bytes(&self) -> &'static [u8] {
        self.bytes
    }

    /// Makes `body` run the agent as PID 1 and as root, with the image's entrypoint and
    /// command (`image.entrypoint`, and `body.cmd` or else `image.cmd`) as its child, run as
    /// the spec's user or else the image's; its socket directory a tmpfs; and labels it.
    pub(crate) fn place(
        &self,
        body: &mut ContainerCreateBody,
        image: ImageDefaults,
        home: SocketHome,
        egress: bool,
    ) {
        let mut child = image.entrypoint;
        child.extend(body.cmd.take().or(image.cmd).unwrap_or_default());
        let mut entrypoint = vec![BINARY_PATH.to_string()];
        // The agent itself is root (it switches users); the sandbox's own processes are not.
        let user = body
            .user
            .replace("0:0".to_string())
            .or(image.user)
            .filter(|user| !user.is_empty());
        if let Some(user) = user {
            entrypoint.push("--user".to_string());
            entrypoint.push(user.clone());
            // The work volume (fresh, root's) becomes the user's, as a home would be.
            if let Some(dir) = body
                .working_dir
                .as_ref()
                .filter(|dir| body.volumes.as_ref().is_some_and(|v| v.contains(dir)))
            {
                entrypoint.push("--user-owns".to_string());
                entrypoint.push(dir.clone());
            }
            body.labels
                .get_or_insert_with(Default::default)
                .insert(LABEL_USER.to_string(), user);
        }
        if egress {
            // Bound before the image's command starts, so nothing else takes the port.
            entrypoint.push("--egress-port".to_string());
            entrypoint.push(wharf_sandbox_protocol::EGRESS_PORT.to_string());
        }
        if !child.is_empty() {
            entrypoint.push("--".to_string());
        }
        body.entrypoint = Some(entrypoint);
        body.cmd = (!child.is_empty()).then_some(child);
        let host_config = body.host_config.get_or_insert_with(Default::default);
        // The agent is PID 1 and reaps orphans itself.
        host_config.init = Some(false);
        let mounts = host_config.mounts.get_or_insert_with(Vec::new);
        if !self.copied {
            mounts.push(DockerMount {
                target: Some(BINARY_PATH.to_string()),
                source: Some(self.binary.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            });
        }
        mounts.push(match home {
            SocketHome::InContainer | SocketHome::ThroughEngine => DockerMount {
                target: Some(SOCKET_DIR.to_string()),
                typ: Some(MountType::TMPFS),
                tmpfs_options: Some(MountTmpfsOptions {
                    size_bytes: Some(SOCKET_DIR_BYTES),
                    mode: Some(0o700),
                    ..Default::default()
                }),
                ..Default::default()
            },
            // Anonymous, so removing the container (with its volumes) removes it.
            SocketHome::OnHost => DockerMount {
                target: Some(SOCKET_DIR.to_string()),
                typ: Some(MountType::VOLUME),
                volume_options: Some(MountVolumeOptions {
                    driver_config: Some(MountVolumeOptionsDriverConfig {
                        name: Some("local".to_string()),
                        options: Some(HashMap::from([
                            ("type".to_string(), "tmpfs".to_string()),
                            ("device".to_string(), "tmpfs".to_string()),
                            (
                                "o".to_string(),
                                format!("size={SOCKET_DIR_BYTES},mode=0700"),
                            ),
                        ])),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        });
        body.labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_AGENT.to_string(), home.label().to_string());
    }
}

/// What an image runs when a container does not say: its entrypoint, command and user.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImageDefaults {
    /// `ENTRYPOINT`.
    pub entrypoint: Vec<String>,
    /// `CMD`.
    pub cmd: Option<Vec<String>>,
    /// `USER`.
    pub user: Option<String>,
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_command_becomes_the_agents_child() {
        let dir = tempfile::tempdir().unwrap();
        let placement = AgentPlacement::install(dir.path(), b"\x7fELF agent").unwrap();
        let mut body = ContainerCreateBody {
            cmd: Some(vec!["serve".into()]),
            ..Default::default()
        };
        let image = ImageDefaults {
            entrypoint: vec!["/entry".into()],
            cmd: Some(vec!["x".into()]),
            user: Some("app".into()),
        };
        placement.place(&mut body, image, SocketHome::InContainer, false);
        assert_eq!(
            body.entrypoint,
            Some(vec![
                BINARY_PATH.to_string(),
                "--user".into(),
                "app".into(),
                "--".into()
            ])
        );
        assert_eq!(body.user.as_deref(), Some("0:0"), "the agent is root");
        assert_eq!(body.cmd, Some(vec!["/entry".into(), "serve".into()]));
        let hc = body.host_config.unwrap();
        assert_eq!(hc.init, Some(false));
        let mounts = hc.mounts.unwrap();
        assert_eq!(
            mounts[1].typ,
            Some(MountType::TMPFS),
            "nothing on the host's disk"
        );
        assert_eq!(
            body.labels.unwrap().get(LABEL_AGENT).map(String::as_str),
            Some("1")
        );

        // No entrypoint, no command anywhere: the agent idles on its own.
        let mut bare = ContainerCreateBody {
            user: Some("1000:1000".into()),
            working_dir: Some("/work".into()),
            volumes: Some(vec!["/work".into()]),
            ..Default::default()
        };
        placement.place(
            &mut bare,
            ImageDefaults::default(),
            SocketHome::InContainer,
            false,
        );
        assert_eq!(
            bare.entrypoint,
            Some(vec![
                BINARY_PATH.to_string(),
                "--user".into(),
                "1000:1000".into(),
                "--user-owns".into(),
                "/work".into()
            ]),
            "the spec's user is the agent's default, and owns the work volume"
        );
        let mut bare = ContainerCreateBody::default();
        placement.place(
            &mut bare,
            ImageDefaults::default(),
            SocketHome::InContainer,
            false,
        );
        assert_eq!(bare.entrypoint, Some(vec![BINARY_PATH.to_string()]));
        assert_eq!(bare.cmd, None);
        assert_eq!(
            socket_of(42),
            PathBuf::from("/proc/42/root/.wharf/run/agent.sock")
        );
    }

    #[test]
    fn a_copied_agent_is_not_mounted() {
        let dir = tempfile::tempdir().unwrap();
        let placement = AgentPlacement::install(dir.path(), b"\x7fELF agent")
            .unwrap()
            .copied();
        assert!(placement.is_copied());
        let mut body = ContainerCreateBody::default();
        placement.place(
            &mut body,
            ImageDefaults::default(),
            SocketHome::ThroughEngine,
            false,
        );
        let mounts = body.host_config.unwrap().mounts.unwrap();
        assert!(
            mounts.iter().all(|m| m.typ != Some(MountType::BIND)),
            "nothing of this host is mounted: {mounts:?}"
        );
        assert_eq!(
            body.labels.unwrap().get(LABEL_AGENT).map(String::as_str),
            Some("engine")
        );
    }

    #[test]
    fn install_is_idempotent_and_named_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let a = AgentPlacement::install(dir.path(), b"one").unwrap();
        let again = AgentPlacement::install(dir.path(), b"one").unwrap();
        let b = AgentPlacement::install(dir.path(), b"two").unwrap();
        assert_eq!(a.binary, again.binary);
        assert_ne!(a.binary, b.binary);
        assert_eq!(std::fs::read(&a.binary).unwrap(), b"one");
        assert!(AgentPlacement::install(dir.path(), b"").is_err());
    }
}

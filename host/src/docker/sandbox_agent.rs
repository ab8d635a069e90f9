//! The sandbox agent in the containers this engine creates: `wharf-sandboxd`, embedded in
//! the `wharf` binary, is written once under the data dir and bind-mounted read-only into
//! every container as its PID 1 (it reaps orphans, so the engine's `--init` is not used).
//! It listens in a small tmpfs of the container's own (`/.wharf/run`, 64 KiB, counted in the
//! container's memory), which the host reaches through `/proc/<PID 1>/root`: nothing the
//! sandbox writes there lands on the host's disk. The image's own entrypoint and command
//! become the agent's child, so a container behaves as it would without the agent.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bollard::models::{ContainerCreateBody, Mount as DockerMount, MountTmpfsOptions, MountType};
use sha2::{Digest as _, Sha256};
use wharf_sandbox_protocol::{BINARY_PATH, SOCKET_DIR, SOCKET_PATH};

use super::labels::LABEL_AGENT;

/// The size of the agent's socket directory (a tmpfs: the socket needs none of it).
const SOCKET_DIR_BYTES: i64 = 64 * 1024;

/// Where the agent's binary lives on this host.
#[derive(Debug, Clone)]
pub struct AgentPlacement {
    binary: PathBuf,
}

/// The agent's socket of the container whose PID 1 is `pid` (as this host sees it),
/// through that process's root.
pub(crate) fn socket_of(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root{SOCKET_PATH}"))
}

impl AgentPlacement {
    /// Writes the agent's `bytes` under `data_dir/sandboxd/`, named by their hash, so a new
    /// build never overwrites a binary a running container has mounted.
    pub fn install(data_dir: &Path, bytes: &[u8]) -> anyhow::Result<Self> {
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
        Ok(AgentPlacement { binary })
    }

    /// Makes `body` run the agent as PID 1, with the image's entrypoint and command
    /// (`image_entrypoint`, and `body.cmd` or else `image_cmd`) as its child, its socket
    /// directory a tmpfs, and labels it.
    pub(crate) fn place(
        &self,
        body: &mut ContainerCreateBody,
        image_entrypoint: Vec<String>,
        image_cmd: Option<Vec<String>>,
    ) {
        let mut child = image_entrypoint;
        child.extend(body.cmd.take().or(image_cmd).unwrap_or_default());
        let mut entrypoint = vec![BINARY_PATH.to_string()];
        if !child.is_empty() {
            entrypoint.push("--".to_string());
        }
        body.entrypoint = Some(entrypoint);
        body.cmd = (!child.is_empty()).then_some(child);
        let host_config = body.host_config.get_or_insert_with(Default::default);
        // The agent is PID 1 and reaps orphans itself.
        host_config.init = Some(false);
        let mounts = host_config.mounts.get_or_insert_with(Vec::new);
        mounts.push(DockerMount {
            target: Some(BINARY_PATH.to_string()),
            source: Some(self.binary.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(true),
            ..Default::default()
        });
        mounts.push(DockerMount {
            target: Some(SOCKET_DIR.to_string()),
            typ: Some(MountType::TMPFS),
            tmpfs_options: Some(MountTmpfsOptions {
                size_bytes: Some(SOCKET_DIR_BYTES),
                mode: Some(0o700),
                ..Default::default()
            }),
            ..Default::default()
        });
        body.labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_AGENT.to_string(), "1".to_string());
    }
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
        placement.place(&mut body, vec!["/entry".into()], Some(vec!["x".into()]));
        assert_eq!(
            body.entrypoint,
            Some(vec![BINARY_PATH.to_string(), "--".into()])
        );
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
        let mut bare = ContainerCreateBody::default();
        placement.place(&mut bare, vec![], None);
        assert_eq!(bare.entrypoint, Some(vec![BINARY_PATH.to_string()]));
        assert_eq!(bare.cmd, None);
        assert_eq!(
            socket_of(42),
            PathBuf::from("/proc/42/root/.wharf/run/agent.sock")
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

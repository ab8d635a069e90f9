//! The sandbox agent in the containers this engine creates: `wharf-sandboxd`, embedded in
//! the `wharf` binary, is written once under the data dir and bind-mounted read-only into
//! every container as its PID 1 (it reaps orphans, so the engine's `--init` is not used).
//! Each container also gets its own host directory, mounted at the agent's socket
//! directory, where the agent listens. The image's own entrypoint and command become the
//! agent's child, so a container behaves as it would without the agent.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bollard::models::{ContainerCreateBody, Mount as DockerMount, MountType};
use sha2::{Digest as _, Sha256};
use wharf_sandbox_protocol::{BINARY_PATH, SOCKET_DIR, SOCKET_NAME};

use super::labels::LABEL_AGENT;

/// A Unix socket path is at most 108 bytes with its NUL; past that the agent is not used.
const MAX_SOCKET_PATH: usize = 100;

/// Where the agent's binary and the per-container socket directories live on this host.
#[derive(Debug, Clone)]
pub struct AgentPlacement {
    binary: PathBuf,
    run_root: PathBuf,
}

impl AgentPlacement {
    /// Writes the agent's `bytes` under `data_dir/sandboxd/` (named by their hash, so a
    /// new build never overwrites a binary a running container has mounted) and prepares
    /// `data_dir/sandboxes/`, the per-container socket directories.
    pub fn install(data_dir: &Path, bytes: &[u8]) -> anyhow::Result<Self> {
        if bytes.is_empty() {
            anyhow::bail!("this build carries no sandbox agent");
        }
        let data_dir = std::fs::canonicalize(data_dir)
            .with_context(|| format!("resolving {}", data_dir.display()))?;
        let bin_dir = data_dir.join("sandboxd");
        let run_root = data_dir.join("sandboxes");
        for dir in [&bin_dir, &run_root] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
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
        Ok(AgentPlacement { binary, run_root })
    }

    /// The host directory holding a container's agent socket; `None` for a name that is
    /// not one plain path component (names come back from the engine: not trusted).
    fn run_dir(&self, container_name: &str) -> Option<PathBuf> {
        let name = container_name.strip_prefix('/').unwrap_or(container_name);
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains('/')
            && !name.contains('\0');
        plain.then(|| self.run_root.join(name))
    }

    /// The host path of a container's agent socket, when it is short enough to connect to.
    pub(crate) fn socket(&self, container_name: &str) -> Option<PathBuf> {
        let path = self.run_dir(container_name)?.join(SOCKET_NAME);
        (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
    }

    /// Makes `body` run the agent as PID 1, with the image's entrypoint and command
    /// (`image_entrypoint`, and `body.cmd` or else `image_cmd`) as its child, and labels
    /// it. Creates the container's socket directory. `None` when the socket path would be
    /// too long (the container is then created without the agent).
    pub(crate) fn place(
        &self,
        container_name: &str,
        body: &mut ContainerCreateBody,
        image_entrypoint: Vec<String>,
        image_cmd: Option<Vec<String>>,
    ) -> anyhow::Result<Option<()>> {
        let Some(run_dir) = self
            .run_dir(container_name)
            .filter(|_| self.socket(container_name).is_some())
        else {
            tracing::warn!(
                container = container_name,
                "the sandbox agent's socket path would be too long (or the name is not plain); the container runs without it"
            );
            return Ok(None);
        };
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("creating {}", run_dir.display()))?;
        set_mode(&run_dir, 0o700)?;
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
            source: Some(run_dir.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(false),
            ..Default::default()
        });
        body.labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_AGENT.to_string(), "1".to_string());
        Ok(Some(()))
    }

    /// Removes a container's socket directory (after the container is gone).
    pub(crate) fn forget(&self, container_name: &str) {
        if let Some(dir) = self.run_dir(container_name) {
            let _ = std::fs::remove_dir_all(dir);
        }
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
        placement
            .place(
                "wharf-b-1",
                &mut body,
                vec!["/entry".into()],
                Some(vec!["x".into()]),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            body.entrypoint,
            Some(vec![BINARY_PATH.to_string(), "--".into()])
        );
        assert_eq!(body.cmd, Some(vec!["/entry".into(), "serve".into()]));
        let hc = body.host_config.unwrap();
        assert_eq!(hc.init, Some(false));
        assert_eq!(hc.mounts.unwrap().len(), 2);
        assert!(dir.path().join("sandboxes/wharf-b-1").is_dir());
        assert_eq!(
            body.labels.unwrap().get(LABEL_AGENT).map(String::as_str),
            Some("1")
        );

        // No entrypoint, no command anywhere: the agent idles on its own.
        let mut bare = ContainerCreateBody::default();
        placement
            .place("wharf-b-2", &mut bare, vec![], None)
            .unwrap()
            .unwrap();
        assert_eq!(bare.entrypoint, Some(vec![BINARY_PATH.to_string()]));
        assert_eq!(bare.cmd, None);
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

    #[test]
    fn a_socket_path_too_long_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let placement = AgentPlacement::install(dir.path(), b"x").unwrap();
        let long = "n".repeat(120);
        assert!(placement.socket(&long).is_none());
        let mut body = ContainerCreateBody::default();
        assert!(
            placement
                .place(&long, &mut body, vec![], None)
                .unwrap()
                .is_none()
        );
        assert!(body.entrypoint.is_none());
        // `forget` never leaves the run root.
        placement.forget("../sandboxd");
        placement.forget("/..");
        assert!(dir.path().join("sandboxd").is_dir());
        assert!(placement.socket("a/../../x").is_none());
    }
}

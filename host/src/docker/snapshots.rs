//! Snapshots of owned containers as local images (`docker commit`), named and labelled by
//! the host, and their removal and listing for the sweep.
//!
//! A commit never holds a volume's files, and a sandbox's work dir is an anonymous volume:
//! before the commit the work dir is copied (as root, by the sandbox's own `sh` and `cp`)
//! to [`HELD_WORK`] in the container's own layer, and the image's
//! `wharf.snapshot.workdir` label says where it belongs; a container started from the
//! snapshot gets it back in its fresh work volume before `start` returns.
//!
//! The engine's commit merges the container's own config into the image's: the sandbox
//! agent's entrypoint, the egress proxy's variables and the host's `wharf.*` labels would
//! all become the snapshot's defaults. So the commit states the original image's entrypoint
//! (an empty one stays empty), command, user and environment, blanks every other variable
//! and label the container added, and adds the snapshot's own labels: a sandbox started
//! from a snapshot is placed exactly like one started from its original image.

use std::collections::HashMap;

use bollard::models::ContainerConfig;
use bollard::query_parameters::{CommitContainerOptions, ListImagesOptions, RemoveImageOptions};

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::labels::engine_filter;
use super::types::Owner;
use crate::engines::container_types::{Command, ExecRequest, SnapshotImage, SnapshotTarget};

/// The label every snapshot image carries: its snapshot id.
pub const LABEL_SNAPSHOT: &str = "wharf.snapshot";

/// The label naming the work dir a snapshot's files go back to.
pub const LABEL_SNAPSHOT_WORKDIR: &str = "wharf.snapshot.workdir";

/// Where a snapshot keeps its work dir's files in the image.
const HELD_WORK: &str = "/.wharf-snapshot-work";

/// The copies in and out of [`HELD_WORK`] take at most this long, ms.
const COPY_TIMEOUT_MS: u32 = 300_000;

/// A path as one single-quoted shell word.
fn quoted(path: &str) -> String {
    format!("'{}'", path.replace('\'', "'\\''"))
}

/// A commit of a large tree takes a while; past this the engine is taken as stuck.
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

fn env_key(entry: &str) -> &str {
    entry.split_once('=').map_or(entry, |(k, _)| k)
}

impl Docker {
    /// Commits an owned container to `target`; the bytes it adds to its base image.
    pub async fn commit(
        &self,
        owner: &Owner,
        id: &str,
        target: &SnapshotTarget,
    ) -> Result<u64, DockerError> {
        let (repo, tag) = target
            .image
            .rsplit_once(':')
            .ok_or_else(|| DockerError::Invalid(format!("`{}` has no tag", target.image)))?;
        let found = self.require_owned(owner, id).await?;
        let container = found.config.unwrap_or_default();
        let base_ref = container.image.clone().unwrap_or_default();
        let api = self.api().await?;
        let base = self
            .run("inspect image", OP_TIMEOUT, api.inspect_image(&base_ref))
            .await?;
        let base_size = u64::try_from(base.size.unwrap_or(0)).unwrap_or(0);
        let image = base.config.unwrap_or_default();
        let mut env = image.env.clone().unwrap_or_default();
        for added in container.env.iter().flatten() {
            let key = env_key(added);
            if !env.iter().any(|e| env_key(e) == key) {
                env.push(format!("{key}="));
            }
        }
        let mut labels: HashMap<String, String> = image.labels.clone().unwrap_or_default();
        for key in container.labels.iter().flatten().map(|(k, _)| k) {
            labels.entry(key.clone()).or_default();
        }
        for (k, v) in &target.labels {
            labels.insert(k.clone(), v.clone());
        }
        // The work dir, when it is a volume: copied into the container's layer first.
        let work = container
            .working_dir
            .clone()
            .filter(|dir| container.volumes.iter().flatten().any(|v| v == dir));
        if let Some(dir) = &work {
            let script = format!(
                "rm -rf {held} && mkdir -p {held} && cp -a {dir}/. {held}/",
                held = HELD_WORK,
                dir = quoted(dir)
            );
            self.shell_as_root(owner, id, &script, "copying the work dir for a snapshot")
                .await?;
        }
        labels.insert(
            LABEL_SNAPSHOT_WORKDIR.to_string(),
            work.clone().unwrap_or_default(),
        );
        let config = ContainerConfig {
            entrypoint: Some(image.entrypoint.clone().unwrap_or_default()),
            cmd: image.cmd.clone(),
            env: Some(env),
            // Empty means root; stated, so the container's user is not taken instead.
            user: Some(
                image
                    .user
                    .clone()
                    .filter(|u| !u.is_empty())
                    .unwrap_or("0".into()),
            ),
            working_dir: image.working_dir.clone(),
            labels: Some(labels),
            ..ContainerConfig::default()
        };
        let options = CommitContainerOptions {
            container: Some(id.to_string()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            comment: Some(format!("wharf snapshot of {}", super::labels::shorten(id))),
            pause: true,
            ..CommitContainerOptions::default()
        };
        let committed = self
            .run(
                "commit container",
                COMMIT_TIMEOUT,
                api.commit_container(options, config),
            )
            .await;
        if work.is_some() {
            let cleared = format!("rm -rf {HELD_WORK}");
            if let Err(e) = self
                .shell_as_root(owner, id, &cleared, "clearing a snapshot's copy")
                .await
            {
                tracing::warn!(container = %id, "{e}");
            }
        }
        committed?;
        let made = self
            .run(
                "inspect image",
                OP_TIMEOUT,
                api.inspect_image(&target.image),
            )
            .await?;
        let size = u64::try_from(made.size.unwrap_or(0)).unwrap_or(0);
        Ok(size.saturating_sub(base_size))
    }

    /// Puts a snapshot's work dir back (a container started from a snapshot image, whose
    /// fresh work volume is empty): moves [`HELD_WORK`] into it. A no-op for any other.
    pub(crate) async fn restore_work(
        &self,
        owner: &Owner,
        id: &str,
        labels: Option<&HashMap<String, String>>,
    ) -> Result<(), DockerError> {
        let Some(dir) = labels
            .and_then(|l| l.get(LABEL_SNAPSHOT_WORKDIR))
            .filter(|d| !d.is_empty())
        else {
            return Ok(());
        };
        let script = format!(
            "if [ -d {held} ]; then cp -a {held}/. {dir}/ && rm -rf {held}; fi",
            held = HELD_WORK,
            dir = quoted(dir)
        );
        self.shell_as_root(owner, id, &script, "restoring a snapshot's work dir")
            .await
    }

    async fn shell_as_root(
        &self,
        owner: &Owner,
        id: &str,
        script: &str,
        what: &str,
    ) -> Result<(), DockerError> {
        let mut request = ExecRequest::new(
            id,
            Command::Argv(vec!["/bin/sh".into(), "-c".into(), script.into()]),
            COPY_TIMEOUT_MS,
            4096,
        );
        request.user = Some("0".into());
        let out = self.exec(owner, request).await?;
        if out.exit_code == Some(0) {
            return Ok(());
        }
        Err(DockerError::Failed(format!(
            "{what} (with the sandbox's /bin/sh and cp) failed: exit {:?}: {}",
            out.exit_code,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }

    /// Removes a snapshot image; one a container still uses is refused, a missing one is
    /// `Ok`. Only images carrying [`LABEL_SNAPSHOT`] are ever removed.
    pub async fn remove_snapshot(&self, image: &str) -> Result<(), DockerError> {
        let api = self.api().await?;
        let Some(found) = self
            .run_found("inspect image", OP_TIMEOUT, api.inspect_image(image))
            .await?
        else {
            return Ok(());
        };
        let is_snapshot = found
            .config
            .and_then(|c| c.labels)
            .is_some_and(|l| l.contains_key(LABEL_SNAPSHOT));
        if !is_snapshot {
            return Err(DockerError::Refused(format!("`{image}` is not a snapshot")));
        }
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            ..RemoveImageOptions::default()
        };
        match self
            .run(
                "remove image",
                OP_TIMEOUT,
                api.remove_image(image, Some(options), None),
            )
            .await
        {
            Ok(_) | Err(DockerError::NotFound(_)) => Ok(()),
            Err(DockerError::Failed(m)) if m.contains("being used") || m.contains("conflict") => {
                Err(DockerError::Refused(format!(
                    "snapshot image `{image}` is in use by a sandbox: end its sessions first"
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// Every image carrying [`LABEL_SNAPSHOT`].
    pub async fn snapshot_images(&self) -> Result<Vec<SnapshotImage>, DockerError> {
        let api = self.api().await?;
        let options = ListImagesOptions {
            filters: Some(engine_filter("label", vec![LABEL_SNAPSHOT.to_string()])),
            ..ListImagesOptions::default()
        };
        let images = self
            .run("list images", OP_TIMEOUT, api.list_images(Some(options)))
            .await?;
        Ok(images
            .into_iter()
            .filter_map(|i| {
                let snapshot = i.labels.get(LABEL_SNAPSHOT)?.clone();
                Some(SnapshotImage {
                    node: i.labels.get(super::labels::LABEL_NODE).cloned(),
                    id: i.id,
                    snapshot,
                    created_at_ms: u64::try_from(i.created).unwrap_or(0).saturating_mul(1000),
                })
            })
            .collect())
    }
}

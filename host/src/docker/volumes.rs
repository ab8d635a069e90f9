//! Named volumes (issue 37): engine volumes the host creates for tenants under names of its
//! own (`wharf-vol-…`), labelled [`LABEL_VOLUME`], removed only when no container uses them.
//!
//! This engine's `local` driver keeps no size quota (`--opt size` answers "no quota
//! support"), so the host measures: on a local engine it walks the volume's directory
//! itself (disk blocks, symlinks not followed, at most [`MAX_WALK_ENTRIES`] entries). A
//! remote engine's volumes are not on this host to measure, so it gets none: creating one
//! is refused (a volume without its size quota would be a weaker promise than asked).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::{ListVolumesOptions, RemoveVolumeOptions};

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::labels::{LABEL_NODE, LABEL_SESSION, engine_filter};
use crate::engines::container_types::{
    EngineVolume, LABEL_VOLUME, LABEL_VOLUME_CREATED, VolumeUser,
};

/// The most files and directories one measurement walks; a volume holding more is
/// reported as too large (its tenant cannot hide bytes behind a walk that never ends).
pub const MAX_WALK_ENTRIES: u64 = 1_000_000;

/// Whether `name` is one the host gives engine volumes (nothing else is ever removed).
fn is_host_volume(name: &str) -> bool {
    name.strip_prefix("wharf-vol-").is_some_and(|rest| {
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

fn check_name(name: &str) -> Result<(), DockerError> {
    if is_host_volume(name) {
        Ok(())
    } else {
        Err(DockerError::Invalid(format!(
            "`{name}` is not a volume the host made"
        )))
    }
}

impl Docker {
    /// Creates engine volume `name` (`wharf-vol-…`) with the host's `labels`.
    pub async fn create_volume(
        &self,
        name: &str,
        labels: &[(String, String)],
    ) -> Result<(), DockerError> {
        check_name(name)?;
        if !self.is_local() {
            return Err(DockerError::Refused(
                "named volumes need a local container engine (the host measures their size itself); this one is remote".to_string(),
            ));
        }
        let api = self.api().await?;
        let request = VolumeCreateRequest {
            name: Some(name.to_string()),
            driver: Some("local".to_string()),
            labels: Some(labels.iter().cloned().collect()),
            ..Default::default()
        };
        self.run("create volume", OP_TIMEOUT, api.create_volume(request))
            .await?;
        Ok(())
    }

    /// Removes engine volume `name`; refused while a container (running or not) uses it; a
    /// missing one is `Ok`.
    pub async fn remove_volume(&self, name: &str) -> Result<(), DockerError> {
        check_name(name)?;
        let api = self.api().await?;
        match self
            .run(
                "remove volume",
                OP_TIMEOUT,
                api.remove_volume(name, Some(RemoveVolumeOptions { force: false })),
            )
            .await
        {
            Ok(()) | Err(DockerError::NotFound(_)) => Ok(()),
            Err(DockerError::Failed(m)) if m.contains("in use") => Err(DockerError::Refused(
                "the volume is in use by a sandbox: end its sessions first".to_string(),
            )),
            Err(e) => Err(e),
        }
    }

    /// The containers (running or not) that mount engine volume `name`.
    pub async fn volume_users(&self, name: &str) -> Result<Vec<VolumeUser>, DockerError> {
        check_name(name)?;
        let found = self
            .list_summaries(engine_filter("volume", vec![name.to_string()]))
            .await?;
        Ok(found
            .into_iter()
            .filter_map(|c| {
                let writes = c
                    .mounts
                    .iter()
                    .flatten()
                    .any(|m| m.name.as_deref() == Some(name) && m.rw != Some(false));
                Some(VolumeUser {
                    read_only: !writes,
                    session: c
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL_SESSION))
                        .cloned(),
                    container: c.id?,
                })
            })
            .collect())
    }

    /// Every engine volume labelled [`LABEL_VOLUME`].
    pub async fn engine_volumes(&self) -> Result<Vec<EngineVolume>, DockerError> {
        let api = self.api().await?;
        let options = ListVolumesOptions {
            filters: Some(engine_filter("label", vec![LABEL_VOLUME.to_string()])),
        };
        let listed = self
            .run("list volumes", OP_TIMEOUT, api.list_volumes(Some(options)))
            .await?;
        Ok(listed
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter(|v| is_host_volume(&v.name))
            .filter_map(|v| {
                Some(EngineVolume {
                    volume: v.labels.get(LABEL_VOLUME)?.clone(),
                    node: v.labels.get(LABEL_NODE).cloned(),
                    created_at_ms: v
                        .labels
                        .get(LABEL_VOLUME_CREATED)
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0),
                    name: v.name,
                })
            })
            .collect())
    }

    /// Whether engine volume `name` exists.
    pub async fn has_volume(&self, name: &str) -> Result<bool, DockerError> {
        check_name(name)?;
        let api = self.api().await?;
        let found = self
            .run_found("inspect volume", OP_TIMEOUT, api.inspect_volume(name))
            .await?;
        Ok(found.is_some())
    }

    /// The bytes engine volume `name`'s files hold now (see the module's note).
    pub async fn volume_bytes(&self, name: &str) -> Result<u64, DockerError> {
        check_name(name)?;
        let api = self.api().await?;
        let volume = self
            .run("inspect volume", OP_TIMEOUT, api.inspect_volume(name))
            .await?;
        let root = PathBuf::from(&volume.mountpoint);
        if !(self.is_local() && root.is_absolute() && root.is_dir()) {
            return Err(DockerError::Refused(format!(
                "volume `{name}`'s files are not on this host: it cannot be measured"
            )));
        }
        tokio::task::spawn_blocking(move || disk_usage(&root, MAX_WALK_ENTRIES))
            .await
            .map_err(|e| DockerError::Failed(format!("measuring a volume: {e}")))?
    }
}

/// The disk blocks under `root` (bytes), symlinks not followed, walking at most
/// `max_entries` entries (more is [`DockerError::TooLarge`]).
fn disk_usage(root: &std::path::Path, max_entries: u64) -> Result<u64, DockerError> {
    let mut pending = vec![root.to_path_buf()];
    let mut bytes: u64 = 0;
    let mut entries: u64 = 0;
    while let Some(dir) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            // Gone (removed while walked) or unreadable: nothing more to count there.
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > max_entries {
                return Err(DockerError::TooLarge(format!(
                    "the volume holds more than {max_entries} files and directories"
                )));
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hosts_own_volume_names_are_touched() {
        assert!(is_host_volume("wharf-vol-0123abcdef"));
        for bad in [
            "wharf-vol-",
            "data",
            "wharf-vol-../x",
            "wharf-vol-a/b",
            "x-wharf-vol-1",
        ] {
            assert!(!is_host_volume(bad), "{bad}");
        }
    }

    #[test]
    fn usage_counts_blocks_without_following_links_and_stops_at_its_bound() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("sub"))?;
        std::fs::write(dir.path().join("sub/a"), vec![7u8; 64 * 1024])?;
        std::os::unix::fs::symlink("/usr", dir.path().join("link"))?;
        let used = disk_usage(dir.path(), 100)?;
        assert!(
            (64 * 1024..1024 * 1024).contains(&used),
            "64 KiB and a directory, not /usr: {used}"
        );
        assert!(matches!(
            disk_usage(dir.path(), 2),
            Err(DockerError::TooLarge(_))
        ));
        Ok(())
    }
}

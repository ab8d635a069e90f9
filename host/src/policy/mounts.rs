//! Host mounts: the `host_mounts` grants and the check of one mount against them, on
//! paths the caller resolved (symlinks followed) on both sides.

use super::{Denial, Grants};
use std::path::{Component, Path, PathBuf};

impl Grants {
    /// The `host_mounts` entries, parsed.
    pub fn mount_grants(&self) -> Result<Vec<MountGrant>, Denial> {
        self.host_mounts
            .iter()
            .map(|e| MountGrant::parse(e))
            .collect()
    }

    /// Checks one mount whose host path the caller resolved (symlinks followed) against
    /// grants resolved the same way: it must lie under a granted path, and a writable
    /// mount needs an `rw:` grant covering it. Messages name the path as requested, never
    /// what it resolved to.
    pub fn check_mount(&self, ask: &MountAsk<'_>, resolved: &[MountGrant]) -> Result<(), Denial> {
        check_mount_path(ask.requested)?;
        let covering: Vec<&MountGrant> = resolved
            .iter()
            .filter(|g| ask.host_path.starts_with(&g.path))
            .collect();
        if covering.is_empty() {
            return Err(Denial(format!(
                "host path `{}` is not granted, or resolves outside what is (grants.host_mounts = {:?})",
                ask.requested.escape_debug(),
                self.host_mounts
            )));
        }
        if !ask.read_only && !covering.iter().any(|g| g.read_write) {
            return Err(Denial(format!(
                "host path `{}` is granted read-only: a writable mount needs an `rw:` entry (grants.host_mounts = {:?})",
                ask.requested.escape_debug(),
                self.host_mounts
            )));
        }
        Ok(())
    }
}

/// One `host_mounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountGrant {
    /// The granted host path (as written, or resolved by the caller).
    pub path: PathBuf,
    /// Whether mounts under it may be writable (`rw:`).
    pub read_write: bool,
}

impl MountGrant {
    /// Parses `/path`, `ro:/path` or `rw:/path`; the path must be absolute without `..`.
    pub fn parse(entry: &str) -> Result<Self, Denial> {
        let (read_write, path) = match entry.split_once(':') {
            Some(("rw", path)) => (true, path),
            Some(("ro", path)) => (false, path),
            _ => (false, entry),
        };
        check_mount_path(path)
            .map_err(|d| Denial(format!("grants.host_mounts entry `{entry}`: {d}")))?;
        Ok(MountGrant {
            path: PathBuf::from(path),
            read_write,
        })
    }
}

/// One mount a container asks for, its host path resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountAsk<'a> {
    /// The host path as the guest asked for it.
    pub requested: &'a str,
    /// The host path with every symlink followed.
    pub host_path: &'a Path,
    /// Whether the guest asked for a read-only mount.
    pub read_only: bool,
}

/// A host path as text: absolute, without `..`, without NUL or control characters.
pub fn check_mount_path(host_path: &str) -> Result<(), Denial> {
    let path = Path::new(host_path);
    if !path.is_absolute()
        || path.components().any(|c| matches!(c, Component::ParentDir))
        || host_path.chars().any(char::is_control)
    {
        return Err(Denial(format!(
            "mount `{}` must be an absolute path without `..` (grants.host_mounts)",
            host_path.escape_debug()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_read_only_unless_an_rw_grant_covers_them() {
        let g = Grants {
            host_mounts: vec![
                "/srv/data".into(),
                "rw:/srv/data/scratch".into(),
                "ro:/opt".into(),
            ],
            ..Grants::default()
        };
        let resolved = g.mount_grants().unwrap();
        assert_eq!(
            resolved,
            vec![
                MountGrant {
                    path: "/srv/data".into(),
                    read_write: false
                },
                MountGrant {
                    path: "/srv/data/scratch".into(),
                    read_write: true
                },
                MountGrant {
                    path: "/opt".into(),
                    read_write: false
                },
            ]
        );
        let ask = |p: &'static str, read_only| MountAsk {
            requested: p,
            host_path: Path::new(p),
            read_only,
        };
        assert!(g.check_mount(&ask("/srv/data/x", true), &resolved).is_ok());
        let e = g
            .check_mount(&ask("/srv/data/x", false), &resolved)
            .unwrap_err();
        assert!(e.0.contains("rw:"), "{e}");
        assert!(
            g.check_mount(&ask("/srv/data/scratch/a", false), &resolved)
                .is_ok()
        );
        assert!(g.check_mount(&ask("/opt", false), &resolved).is_err());
        for bad in ["rw:relative", "/a/../b", "rw:", "data"] {
            let g = Grants {
                host_mounts: vec![bad.into()],
                ..Grants::default()
            };
            assert!(g.validate().is_err(), "{bad}");
        }
    }
}

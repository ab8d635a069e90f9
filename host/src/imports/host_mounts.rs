//! Host paths a container asks to bind-mount, resolved on the host before the grants see
//! them: a path is compared only after every symlink in it (and in the grants) is
//! followed, so a link inside a granted directory cannot point the mount anywhere else,
//! and the mount is made from the resolved path, not from the link.

use std::path::Path;

use crate::policy::{Denial, Grants, MountGrant, check_mount_path};

/// A requested mount with its host path resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedMount {
    /// The host path as the guest asked for it.
    pub requested: String,
    /// The host path with every symlink followed.
    pub host_path: String,
    /// Where it appears in the container.
    pub container_path: String,
    /// Whether the guest asked for read-only.
    pub read_only: bool,
}

/// Resolves a requested host path: absolute, without `..`, under a granted path as
/// written (or as resolved) before anything on the host is looked at — so the answers
/// say nothing about paths outside the grants — then existing, and resolving to text (a
/// resolved path that is not UTF-8 could not be passed on unchanged).
pub async fn resolve_path(
    host_path: &str,
    grants: &Grants,
    resolved_grants: &[MountGrant],
) -> Result<String, Denial> {
    check_mount_path(host_path)?;
    let path = Path::new(host_path);
    let written = grants.mount_grants()?;
    if !written
        .iter()
        .chain(resolved_grants)
        .any(|g| path.starts_with(&g.path))
    {
        return Err(Denial(format!(
            "host path `{}` is not granted (grants.host_mounts = {:?})",
            host_path.escape_debug(),
            grants.host_mounts
        )));
    }
    let resolved = tokio::fs::canonicalize(host_path).await.map_err(|e| {
        Denial(format!(
            "host path `{}` cannot be resolved on this host ({}) (grants.host_mounts)",
            host_path.escape_debug(),
            e.kind()
        ))
    })?;
    resolved.into_os_string().into_string().map_err(|_| {
        Denial(format!(
            "host path `{}` resolves to a name that is not UTF-8 (grants.host_mounts)",
            host_path.escape_debug()
        ))
    })
}

/// The backend's `host_mounts` grants with their paths resolved. A granted path that does
/// not exist (yet) grants nothing until it does.
pub async fn resolve_grants(grants: &Grants) -> Result<Vec<MountGrant>, Denial> {
    let mut out = Vec::new();
    for grant in grants.mount_grants()? {
        if let Ok(path) = tokio::fs::canonicalize(&grant.path).await {
            out.push(MountGrant {
                path,
                read_write: grant.read_write,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::MountAsk;

    #[tokio::test]
    async fn a_symlink_out_of_a_grant_resolves_outside_it() {
        let granted = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = granted.path().join("link");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let g = Grants {
            host_mounts: vec![granted.path().display().to_string()],
            ..Grants::default()
        };
        let resolved = resolve_grants(&g).await.unwrap();
        // Mounts `asked` read-only, as `container.create` would: resolved, then checked.
        let mount = async |asked: &Path| {
            let asked = asked.display().to_string();
            let path = resolve_path(&asked, &g, &resolved).await.unwrap();
            let ask = MountAsk {
                requested: &asked,
                host_path: Path::new(&path),
                read_only: true,
            };
            g.check_mount(&ask, &resolved)
        };
        let e = mount(&link).await.unwrap_err();
        assert!(
            !e.0.contains(&elsewhere.path().display().to_string()),
            "{e}"
        );
        let inside = granted.path().join("in");
        std::fs::create_dir(&inside).unwrap();
        assert!(mount(&inside).await.is_ok());
        let missing = granted.path().join("missing").display().to_string();
        let e = resolve_path(&missing, &g, &resolved).await.unwrap_err();
        assert!(e.0.contains("cannot be resolved"), "{e}");
        // Outside the grants nothing on the host is looked at: an existing path and a
        // missing one get the same answer.
        let a = resolve_path("/etc", &g, &resolved).await.unwrap_err();
        let b = resolve_path("/no-such-wharf-dir", &g, &resolved)
            .await
            .unwrap_err();
        assert!(a.0.contains("is not granted") && b.0.contains("is not granted"));
        assert!(resolve_path("relative", &g, &resolved).await.is_err());
    }
}

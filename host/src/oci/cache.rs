//! Pulled blobs (manifests, layers, signatures) kept by digest under the data dir, beside
//! the compile cache, so a restart with the registry down still serves what it pulled.
//! Every read re-hashes the file: a blob that no longer matches its name is removed and
//! counts as absent. Tags are remembered as pointers to the last digest they resolved to.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The blob cache.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// Opens (creating) the cache at `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        for sub in ["blobs", "tags"] {
            crate::private_files::create_private_dir(&dir.join(sub))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        is_sha256_digest(digest).then(|| self.dir.join("blobs").join(hex))
    }

    /// The blob named `digest`, if cached and intact.
    pub fn read(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256_digest(&bytes) != digest {
            tracing::warn!(%digest, "cached blob does not match its digest: removed");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(bytes)
    }

    /// Keeps `bytes` under its digest.
    pub fn write(&self, bytes: &[u8]) -> Result<String> {
        let digest = sha256_digest(bytes);
        let path = self
            .blob_path(&digest)
            .context("a sha256 digest always names a path")?;
        if !path.exists() {
            write_atomically(&path, bytes)?;
        }
        Ok(digest)
    }

    fn tag_path(&self, key: &str) -> PathBuf {
        self.dir
            .join("tags")
            .join(hex::encode(Sha256::digest(key.as_bytes())))
    }

    /// The digest `key` (a tagged reference) last resolved to.
    pub fn tag(&self, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.tag_path(key)).ok()?;
        let digest = text.trim();
        is_sha256_digest(digest).then(|| digest.to_string())
    }

    /// Remembers that `key` resolved to `digest`.
    pub fn set_tag(&self, key: &str, digest: &str) -> Result<()> {
        write_atomically(&self.tag_path(key), digest.as_bytes())
    }
}

/// Writes a temporary file beside `path` and renames it into place, so a reader never sees
/// half a blob.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("a cache path has a parent")?;
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing into {}", dir.display()))?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_that_no_longer_matches_its_digest_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::open(dir.path()).unwrap();
        let digest = cache.write(b"component").unwrap();
        assert_eq!(cache.read(&digest).as_deref(), Some(&b"component"[..]));
        let hex = digest.strip_prefix("sha256:").unwrap();
        std::fs::write(dir.path().join("blobs").join(hex), b"tampered").unwrap();
        assert!(cache.read(&digest).is_none());
        assert!(cache.read("sha256:../../etc/passwd").is_none());
    }
}

//! Files only the user running Wharf may read: the data dir is created 0700, and the
//! files kept in it (the state store, the node id, compiled components) are 0600, whatever
//! the umask.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Creates `dir` (and its parents) 0700 when it is missing. An existing directory is left
/// as it is (it may be shared, like a mount point), with a warning when others can enter
/// it: the files Wharf writes there are 0600 anyway.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "the data dir {} is open to other users (mode {:o}); Wharf's files in it are 0600, but 0700 is advised",
                    dir.display(),
                    mode & 0o777
                );
            }
        }
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Writes `bytes` to `path` (replacing it), readable and writable by this user only.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    restrict_open(&file, path)?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Creates `path` empty 0600 when it is missing, and makes it 0600 when it exists (a file
/// another program then opens, like the SQLite database, which gives its `-wal` and `-shm`
/// files the database's own mode).
pub fn ensure_private(path: &Path) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    restrict_open(&file, path)
}

/// Makes `path` 0600 if it exists.
pub fn restrict_if_present(path: &Path) -> Result<()> {
    match std::fs::File::open(path) {
        Ok(file) => restrict_open(&file, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("opening {}", path.display())),
    }
}

/// 0600 on an open file (a file that existed keeps the mode it had when created).
fn restrict_open(file: &std::fs::File, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = (file, path);
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o777)
    }

    #[test]
    fn dirs_are_0700_and_files_0600() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/data");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        std::fs::write(&file, b"old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&file, b"new").unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        let db = dir.join("db");
        ensure_private(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        restrict_if_present(&dir.join("absent")).unwrap();
    }
}

//! Reading a file nobody vouches for: refused unless it is a regular file, never blocking
//! on a FIFO, capped while it is read (a sparse file's size says nothing about what it
//! costs to read), and a symbolic link followed only when the caller says so.

use std::path::PathBuf;

/// Whether a symbolic link at the path itself is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Refused (`ELOOP`): the path must name the file itself.
    Refuse,
    /// Followed: the operator named the path (orchestrators mount secrets through links).
    Follow,
}

/// The error's text when the file is not a regular file.
pub const NOT_PLAIN: &str = "not a plain file";

/// Whether `e` says the file was a symbolic link (under [`Links::Refuse`]) or not a
/// regular file.
pub fn is_not_plain(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) {
        return true;
    }
    e.kind() == std::io::ErrorKind::InvalidInput && e.to_string() == NOT_PLAIN
}

/// The file at `path`, at most `limit` bytes; over the limit is `InvalidData`.
pub async fn read(path: PathBuf, limit: u64, links: Links) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let nofollow = match links {
                Links::Refuse => libc::O_NOFOLLOW,
                Links::Follow => 0,
            };
            options.custom_flags(nofollow | libc::O_NONBLOCK);
        }
        let file = options.open(&path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                NOT_PLAIN,
            ));
        }
        let too_large = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the file is over {limit} bytes"),
            )
        };
        if file.metadata()?.len() > limit {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(too_large());
        }
        Ok(bytes)
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn caps_refuses_fifos_and_links_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(
            read(file.clone(), 5, Links::Refuse).await.unwrap(),
            b"12345"
        );
        let over = read(file.clone(), 4, Links::Refuse).await.unwrap_err();
        assert_eq!(over.kind(), std::io::ErrorKind::InvalidData);
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(is_not_plain(
            &read(link.clone(), 5, Links::Refuse).await.unwrap_err()
        ));
        assert_eq!(read(link, 5, Links::Follow).await.unwrap(), b"12345");
        let fifo = dir.path().join("p");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(is_not_plain(
            &read(fifo, 5, Links::Follow).await.unwrap_err()
        ));
        assert!(is_not_plain(
            &read(dir.path().to_path_buf(), 5, Links::Follow)
                .await
                .unwrap_err()
        ));
    }
}

//! Copying one file into or out of a container, through Docker's tar archive endpoints.
//! Copy-in builds a small archive (creating missing parent directories); copy-out reads
//! the archive as a stream and stops as soon as it knows the file is too large, so a
//! huge file is never buffered.

use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::query_parameters::{
    ContainerArchiveInfoOptions, DownloadFromContainerOptions, UploadToContainerOptions,
};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tar::{EntryType, Header};

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::labels::shorten;
use super::types::Owner;

/// Go's `os.ModeDir`, as Docker reports it in a path stat.
const GO_MODE_DIR: u32 = 1 << 31;
/// Symbolic links followed by `copy_out` before giving up.
const MAX_SYMLINK_HOPS: usize = 8;
/// Time allowed for an upload, on top of the ordinary call limit, per MiB.
const UPLOAD_TIME_PER_MIB: Duration = Duration::from_secs(1);

/// Normalises an absolute path: drops `.` and empty components and resolves `..` lexically
/// (Docker resolves paths inside the container's root anyway). Returns the components.
pub(crate) fn components(path: &str) -> Result<Vec<String>, DockerError> {
    if !path.starts_with('/') || path.contains('\0') {
        return Err(DockerError::Invalid(format!(
            "path must be absolute, got {:?}",
            shorten(path)
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p.to_string()),
        }
    }
    Ok(out)
}

fn join(parts: &[String]) -> String {
    format!("/{}", parts.join("/"))
}

/// A tar archive with the directories `dirs` (relative, in creation order) and the file
/// `file` (relative path), for extraction at some existing directory.
pub(crate) fn build_archive(
    dirs: &[String],
    file: &str,
    content: &[u8],
    mode: u32,
) -> Result<Vec<u8>, DockerError> {
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut builder = tar::Builder::new(Vec::with_capacity(content.len() + 2048));
    let io_err = |e: std::io::Error| DockerError::Invalid(format!("cannot archive: {e}"));
    for dir in dirs {
        let mut header = Header::new_gnu();
        header.set_entry_type(EntryType::Directory);
        header.set_mode(0o755);
        header.set_size(0);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        builder
            .append_data(&mut header, dir, std::io::empty())
            .map_err(io_err)?;
    }
    let mut header = Header::new_gnu();
    header.set_entry_type(EntryType::Regular);
    header.set_mode(mode & 0o7777);
    header.set_size(content.len() as u64);
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    builder
        .append_data(&mut header, file, content)
        .map_err(io_err)?;
    builder.into_inner().map_err(io_err)
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, bollard::errors::Error>> + Send>>;

/// Pulls bytes off a download stream on demand.
struct TarReader {
    stream: ByteStream,
    buf: Vec<u8>,
    what: String,
}

impl TarReader {
    /// Makes `buf` hold at least `n` bytes; `false` if the stream ended first.
    async fn fill(&mut self, n: usize) -> Result<bool, DockerError> {
        while self.buf.len() < n {
            let next = tokio::time::timeout(OP_TIMEOUT, self.stream.next())
                .await
                .map_err(|_| {
                    DockerError::Unavailable(format!("{}: the engine stopped sending", self.what))
                })?;
            match next {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(DockerError::from_bollard(e, &self.what)),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Exactly `n` bytes.
    async fn take(&mut self, n: usize) -> Result<Vec<u8>, DockerError> {
        if !self.fill(n).await? {
            return Err(DockerError::Failed(format!(
                "{}: archive ended early",
                self.what
            )));
        }
        let rest = self.buf.split_off(n);
        Ok(std::mem::replace(&mut self.buf, rest))
    }

    /// The data of an entry of `size` bytes plus its padding to 512.
    async fn take_padded(&mut self, size: u64) -> Result<Vec<u8>, DockerError> {
        let size = usize::try_from(size)
            .map_err(|_| DockerError::Failed(format!("{}: entry too large", self.what)))?;
        let mut data = self.take(size.div_ceil(512) * 512).await?;
        data.truncate(size);
        Ok(data)
    }
}

/// What the archive of one path starts with.
enum First {
    File(Vec<u8>),
    Link(String),
}

/// Reads the first real entry of the archive: its content if it is a regular file no
/// larger than `max_bytes`, its target if it is a symbolic link.
async fn read_first(
    reader: &mut TarReader,
    max_bytes: u64,
    path: &str,
) -> Result<First, DockerError> {
    let mut long_link: Option<String> = None;
    let mut pax_size: Option<u64> = None;
    // Extension headers (PAX, GNU long names) precede the entry they describe.
    for _ in 0..8 {
        let raw = reader.take(512).await?;
        if raw.iter().all(|b| *b == 0) {
            return Err(DockerError::NotFound(format!("file {}", shorten(path))));
        }
        let header = Header::from_byte_slice(&raw);
        let size = || {
            header
                .entry_size()
                .map_err(|e| DockerError::Failed(format!("{}: bad tar header: {e}", reader.what)))
        };
        match header.entry_type() {
            EntryType::XHeader | EntryType::XGlobalHeader => {
                let size = size()?;
                let data = reader.take_padded(size.min(1 << 20)).await?;
                for ext in tar::PaxExtensions::new(&data).flatten() {
                    match (ext.key(), ext.value()) {
                        (Ok("size"), Ok(v)) => pax_size = v.trim().parse().ok(),
                        (Ok("linkpath"), Ok(v)) => long_link = Some(v.to_string()),
                        _ => {}
                    }
                }
            }
            EntryType::GNULongName => {
                let size = size()?;
                reader.take_padded(size.min(1 << 20)).await?;
            }
            EntryType::GNULongLink => {
                let size = size()?;
                let data = reader.take_padded(size.min(1 << 20)).await?;
                let text = String::from_utf8_lossy(&data);
                long_link = Some(text.trim_end_matches('\0').to_string());
            }
            EntryType::Regular | EntryType::Continuous => {
                let size = match pax_size {
                    Some(s) => s,
                    None => size()?,
                };
                if size > max_bytes {
                    return Err(DockerError::TooLarge(format!(
                        "{} is {size} bytes, more than the limit of {max_bytes}",
                        shorten(path)
                    )));
                }
                return reader.take_padded(size).await.map(First::File);
            }
            EntryType::Symlink => {
                let target = match long_link {
                    Some(t) => t,
                    None => header
                        .link_name()
                        .ok()
                        .flatten()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                };
                return Ok(First::Link(target));
            }
            EntryType::Directory => {
                return Err(DockerError::Invalid(format!(
                    "{} is a directory",
                    shorten(path)
                )));
            }
            other => {
                return Err(DockerError::Invalid(format!(
                    "{} is not a regular file ({other:?})",
                    shorten(path)
                )));
            }
        }
    }
    Err(DockerError::Failed(format!(
        "{}: too many tar extension headers",
        reader.what
    )))
}

impl Docker {
    /// Writes one file into an owned container (replacing it), creating missing parent
    /// directories (mode 0755). With a read-only root the path must be on a volume.
    pub async fn copy_in(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<(), DockerError> {
        let parts = components(path)?;
        let Some((file, parents)) = parts.split_last() else {
            return Err(DockerError::Invalid("cannot write to /".into()));
        };
        if path.ends_with('/') {
            return Err(DockerError::Invalid(format!(
                "{} names a directory",
                shorten(path)
            )));
        }
        self.require_owned(owner, id).await?;
        let api = self.api().await?;

        // The deepest existing ancestor; the archive creates the rest.
        let mut existing = parents.len();
        loop {
            if existing == 0 {
                break;
            }
            let dir = join(&parents[..existing]);
            let options = ContainerArchiveInfoOptions { path: dir.clone() };
            match self
                .run(
                    "stat directory",
                    OP_TIMEOUT,
                    api.get_container_archive_info(id, Some(options)),
                )
                .await
            {
                Ok(stat) if stat.file_mode & GO_MODE_DIR != 0 => break,
                Ok(_) => {
                    return Err(DockerError::Invalid(format!(
                        "{} is not a directory",
                        shorten(&dir)
                    )));
                }
                Err(DockerError::NotFound(_)) => existing -= 1,
                Err(e) => return Err(e),
            }
        }
        let dirs: Vec<String> = (existing + 1..=parents.len())
            .map(|n| parents[existing..n].join("/"))
            .collect();
        let relative = parts[existing..].join("/");
        debug_assert!(relative.ends_with(file.as_str()));
        let archive = build_archive(&dirs, &relative, content, mode)?;
        let options = UploadToContainerOptions {
            path: join(&parents[..existing]),
            ..Default::default()
        };
        let mib = u32::try_from(archive.len() >> 20).unwrap_or(u32::MAX);
        let limit = OP_TIMEOUT + UPLOAD_TIME_PER_MIB * mib;
        let what = format!("copy to {}", shorten(path));
        self.run(
            &what,
            limit,
            api.upload_to_container(id, Some(options), bollard::body_full(Bytes::from(archive))),
        )
        .await
    }

    /// Reads one regular file out of an owned container (following symbolic links).
    /// `TooLarge` if it is larger than `max_bytes`; `Invalid` for a directory or a
    /// special file; `NotFound` if it does not exist.
    pub async fn copy_out(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, DockerError> {
        let mut current = components(path)?;
        if current.is_empty() {
            return Err(DockerError::Invalid("/ is a directory".into()));
        }
        self.require_owned(owner, id).await?;
        let api = self.api().await?;
        for _ in 0..=MAX_SYMLINK_HOPS {
            let shown = join(&current);
            let options = DownloadFromContainerOptions {
                path: shown.clone(),
            };
            let mut reader = TarReader {
                stream: Box::pin(api.download_from_container(id, Some(options))),
                buf: Vec::new(),
                what: format!("copy from {}", shorten(&shown)),
            };
            let first =
                tokio::time::timeout(OP_TIMEOUT, read_first(&mut reader, max_bytes, &shown))
                    .await
                    .map_err(|_| DockerError::Unavailable(format!("{}: timed out", reader.what)))?;
            match first {
                Ok(First::File(data)) => return Ok(data),
                Ok(First::Link(target)) => {
                    let next = if target.starts_with('/') {
                        target
                    } else {
                        format!("{}/{target}", join(&current[..current.len() - 1]))
                    };
                    current = components(&next)?;
                    if current.is_empty() {
                        return Err(DockerError::Invalid(format!(
                            "{} links to /",
                            shorten(path)
                        )));
                    }
                }
                Err(DockerError::NotFound(_)) => {
                    return Err(DockerError::NotFound(format!("file {}", shorten(path))));
                }
                Err(e) => return Err(e),
            }
        }
        Err(DockerError::Invalid(format!(
            "{}: too many levels of symbolic links",
            shorten(path)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise() {
        assert_eq!(
            components("/a/./b//c/../d").ok(),
            Some(vec!["a".to_string(), "b".into(), "d".into()])
        );
        assert_eq!(components("/../..").ok(), Some(vec![]));
        assert!(components("relative").is_err());
    }

    #[tokio::test]
    async fn archives_roundtrip_through_the_reader() {
        let content: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let long = format!("{}/file.bin", "d".repeat(120));
        let archive = build_archive(&["x".into()], &long, &content, 0o640).unwrap_or_default();
        let chunks: Vec<Result<Bytes, bollard::errors::Error>> = archive
            .chunks(700)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let mut reader = TarReader {
            stream: Box::pin(futures::stream::iter(chunks)),
            buf: Vec::new(),
            what: "t".into(),
        };
        // The first entry is the directory.
        assert!(matches!(
            read_first(&mut reader, 10_000, "/x").await,
            Err(DockerError::Invalid(_))
        ));

        let archive = build_archive(&[], &long, &content, 0o640).unwrap_or_default();
        let stream = futures::stream::iter(vec![Ok(Bytes::from(archive.clone()))]);
        let mut reader = TarReader {
            stream: Box::pin(stream),
            buf: Vec::new(),
            what: "t".into(),
        };
        match read_first(&mut reader, 10_000, "/f").await {
            Ok(First::File(data)) => assert_eq!(data, content),
            _ => panic!("expected the file back"),
        }
        let stream = futures::stream::iter(vec![Ok(Bytes::from(archive))]);
        let mut reader = TarReader {
            stream: Box::pin(stream),
            buf: Vec::new(),
            what: "t".into(),
        };
        assert!(matches!(
            read_first(&mut reader, 4999, "/f").await,
            Err(DockerError::TooLarge(_))
        ));
    }
}

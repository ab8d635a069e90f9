//! Helper mode for file operations: `wharf-sandboxd --files-helper HEX`, where `HEX` is
//! an encoded [`FileOp`]. The agent spawns it as the sandbox's user (`crate::files`), so
//! it can reach exactly what that user's commands can. It writes the operation's output to
//! stdout (see `wharf_sandbox_protocol`'s `files` module), a reason to stderr, and exits
//! with one of the `EXIT_` codes.

use std::ffi::OsString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::time::UNIX_EPOCH;

use wharf_sandbox_protocol::{
    FileEvent, FileEventKind, FileInfo, FileKind, FileOp, Listing, MAX_LIST_ENTRIES,
    MAX_WATCHED_DIRECTORIES, decode, encode,
};

/// The first argument that puts the agent's binary in this mode.
pub const HELPER_FLAG: &str = "--files-helper";

/// Exit code: the request or the input was wrong (a directory where a file was meant, a
/// tar entry that leaves its directory).
pub const EXIT_INVALID: u8 = 2;
/// Exit code: no such file or directory.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code: the operating system refused.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the user may not (permission denied).
pub const EXIT_DENIED: u8 = 4;

/// A failed operation: its exit code and reason.
struct Failure(u8, String);

impl Failure {
    fn invalid(message: impl Into<String>) -> Self {
        Failure(EXIT_INVALID, message.into())
    }

    fn io(what: &str, path: &Path, error: &io::Error) -> Self {
        if error.kind() == io::ErrorKind::NotFound {
            return Failure(
                EXIT_NOT_FOUND,
                format!("no such file or directory: `{}`", path.display()),
            );
        }
        let code = match error.kind() {
            io::ErrorKind::NotFound => EXIT_NOT_FOUND,
            io::ErrorKind::NotADirectory | io::ErrorKind::IsADirectory => EXIT_INVALID,
            io::ErrorKind::PermissionDenied => EXIT_DENIED,
            _ => EXIT_FAILED,
        };
        Failure(code, format!("cannot {what} `{}`: {error}", path.display()))
    }
}

/// The op's argument: lowercase hex of its encoding.
pub fn encode_op(op: &FileOp) -> String {
    encode(op).iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_op(hex: &str) -> Option<FileOp> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    decode(&bytes).ok()
}

/// Helper mode's entry.
pub fn helper_main(args: &[OsString]) -> ExitCode {
    // A watch blocks in the kernel until a change comes: it must not outlive the agent that
    // relays it (in a container the agent's end is the container's anyway).
    if let Err(error) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("cannot tie the helper to the agent: {error}");
        return ExitCode::from(EXIT_FAILED);
    }
    let Some(op) = args
        .first()
        .and_then(|arg| arg.to_str())
        .and_then(decode_op)
    else {
        eprintln!("usage: wharf-sandboxd {HELPER_FLAG} ENCODED-OP");
        return ExitCode::from(EXIT_INVALID);
    };
    match perform(op) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(code, message)) => {
            eprintln!("{message}");
            ExitCode::from(code)
        }
    }
}

fn perform(op: FileOp) -> Result<(), Failure> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout.lock());
    let written = |result: io::Result<()>| {
        result.map_err(|e| Failure(EXIT_FAILED, format!("cannot write the output: {e}")))
    };
    match op {
        FileOp::Stat { path } => {
            let path = PathBuf::from(path);
            let meta = fs::symlink_metadata(&path).map_err(|e| Failure::io("stat", &path, &e))?;
            written(out.write_all(&encode(&info(&path, &meta))))?;
        }
        FileOp::List { path } => {
            let listing = list(Path::new(&path))?;
            written(out.write_all(&encode(&listing)))?;
        }
        FileOp::Read {
            path,
            offset,
            max_bytes,
        } => {
            let path = PathBuf::from(path);
            let mut file = open_regular(&path)?;
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| Failure::io("seek in", &path, &e))?;
            written(copy(&mut file.take(max_bytes), &mut out).map(|_| ()))?;
        }
        FileOp::Write { path, append } => write(Path::new(&path), append)?,
        FileOp::TarOut { path } => tar_out(Path::new(&path), &mut out)?,
        FileOp::TarIn { path } => tar_in(Path::new(&path))?,
        FileOp::Watch { path, recursive } => {
            crate::watch::watch(Path::new(&path), recursive, &mut out)?
        }
    }
    written(out.flush())
}

impl From<crate::watch::WatchFailure> for Failure {
    fn from(failure: crate::watch::WatchFailure) -> Self {
        match failure {
            crate::watch::WatchFailure::Io(what, path, error) => Failure::io(what, &path, &error),
            crate::watch::WatchFailure::Output(error) => {
                Failure(EXIT_FAILED, format!("cannot write the output: {error}"))
            }
        }
    }
}

fn kind_of(meta: &Metadata) -> FileKind {
    let kind = meta.file_type();
    if kind.is_file() {
        FileKind::File
    } else if kind.is_dir() {
        FileKind::Directory
    } else if kind.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    }
}

fn info(path: &Path, meta: &Metadata) -> FileInfo {
    let kind = kind_of(meta);
    FileInfo {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string_lossy().into_owned()),
        kind,
        size: meta.len(),
        mode: meta.permissions().mode() & 0o7777,
        owner: (meta.uid(), meta.gid()),
        modified_ms: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        link_target: (kind == FileKind::Symlink)
            .then(|| fs::read_link(path).ok())
            .flatten()
            .map(|t| t.to_string_lossy().into_owned()),
    }
}

fn list(dir: &Path) -> Result<Listing, Failure> {
    let entries = fs::read_dir(dir).map_err(|e| Failure::io("list", dir, &e))?;
    let mut listed = Vec::new();
    let mut truncated = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| Failure::io("list", dir, &e))?;
        if listed.len() >= MAX_LIST_ENTRIES {
            truncated += 1;
            continue;
        }
        let path = entry.path();
        // An entry removed meanwhile is left out.
        if let Ok(meta) = fs::symlink_metadata(&path) {
            listed.push(info(&path, &meta));
        }
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listing {
        entries: listed,
        truncated,
    })
}

fn open_regular(path: &Path) -> Result<File, Failure> {
    // Not blocking: opening a FIFO for reading would wait for a writer.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| Failure::io("open", path, &e))?;
    let meta = file.metadata().map_err(|e| Failure::io("stat", path, &e))?;
    if meta.is_dir() {
        return Err(Failure::invalid(format!(
            "`{}` is a directory",
            path.display()
        )));
    }
    if !meta.is_file() {
        return Err(Failure::invalid(format!(
            "`{}` is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

fn write(path: &Path, append: bool) -> Result<(), Failure> {
    if path.is_dir() {
        return Err(Failure::invalid(format!(
            "`{}` is a directory",
            path.display()
        )));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| Failure::io("make", parent, &e))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(|e| Failure::io("open", path, &e))?;
    copy(&mut io::stdin().lock(), &mut file).map_err(|e| Failure::io("write", path, &e))?;
    Ok(())
}

/// Copies through a buffer of its own. Not `io::copy`: from a pipe to a file it splices,
/// and under gVisor a splice from an empty pipe whose writer has not written yet answers
/// 0, which `io::copy` takes for the end (measured: 2 writes in 5 came out empty).
fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buffer = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buffer[..n])?;
        total += n as u64;
    }
}

/// A directory's contents (or one file) as a tar stream; symlinks stay links, and what is
/// neither a file, a directory nor a link (sockets, pipes, devices) is left out.
fn tar_out(path: &Path, out: &mut impl Write) -> Result<(), Failure> {
    let meta = fs::metadata(path).map_err(|e| Failure::io("stat", path, &e))?;
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let failed = |e: io::Error, at: &Path| Failure::io("archive", at, &e);
    if !meta.is_dir() {
        let name = path
            .file_name()
            .ok_or_else(|| Failure::invalid(format!("`{}` names no file", path.display())))?;
        builder
            .append_path_with_name(path, name)
            .map_err(|e| failed(e, path))?;
        return builder.finish().map_err(|e| failed(e, path));
    }
    // Depth-first, each directory's entries in name order, so the stream is reproducible.
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let dir = path.join(&relative);
        let mut entries = fs::read_dir(&dir)
            .and_then(|entries| entries.collect::<io::Result<Vec<_>>>())
            .map_err(|e| failed(e, &dir))?;
        entries.sort_by_key(|entry| entry.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            let name = relative.join(entry.file_name());
            let full = entry.path();
            let Ok(meta) = fs::symlink_metadata(&full) else {
                continue;
            };
            let kind = meta.file_type();
            if kind.is_dir() {
                builder
                    .append_dir(&name, &full)
                    .map_err(|e| failed(e, &full))?;
                subdirs.push(name);
            } else if kind.is_file() || kind.is_symlink() {
                builder
                    .append_path_with_name(&full, &name)
                    .map_err(|e| failed(e, &full))?;
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    builder.finish().map_err(|e| failed(e, path))
}

/// Whether a name in an archive stays inside the directory it is unpacked in.
fn stays_inside(name: &Path) -> bool {
    !name.as_os_str().is_empty()
        && name
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Unpacks stdin's tar stream into `dir`. Entries whose names leave `dir` (absolute,
/// `..`) are refused, as is a hard link whose target does; the tar crate refuses an entry
/// that would be written through a symlink pointing out of `dir`.
fn tar_in(dir: &Path) -> Result<(), Failure> {
    fs::create_dir_all(dir).map_err(|e| Failure::io("make", dir, &e))?;
    let stdin = io::stdin();
    let mut archive = tar::Archive::new(stdin.lock());
    archive.set_overwrite(true);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_unpack_xattrs(false);
    let entries = archive
        .entries()
        .map_err(|e| Failure::invalid(format!("not a tar stream: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Failure::invalid(format!("a bad tar entry: {e}")))?;
        let name = entry
            .path()
            .map_err(|e| Failure::invalid(format!("a bad tar entry name: {e}")))?
            .into_owned();
        if !stays_inside(&name) {
            return Err(Failure::invalid(format!(
                "the archive's entry `{}` leaves the directory",
                name.display()
            )));
        }
        if entry.header().entry_type().is_hard_link() {
            let target = entry.link_name().ok().flatten();
            if !target.is_some_and(|t| stays_inside(&t)) {
                return Err(Failure::invalid(format!(
                    "the archive's hard link `{}` points outside the directory",
                    name.display()
                )));
            }
        }
        match entry.unpack_in(dir) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Failure::invalid(format!(
                    "the archive's entry `{}` leaves the directory",
                    name.display()
                )));
            }
            Err(e) => {
                return Err(Failure::invalid(format!(
                    "cannot unpack `{}`: {e}",
                    name.display()
                )));
            }
        }
    }
    Ok(())
}

/// One event, behind its 4-byte length.
pub fn write_event(out: &mut impl Write, event: &FileEvent) -> io::Result<()> {
    let frame = encode(event);
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    out.write_all(&len.to_be_bytes())?;
    out.write_all(&frame)?;
    out.flush()
}

/// The overflow event.
pub fn overflow() -> FileEvent {
    FileEvent {
        kind: FileEventKind::Overflow,
        path: String::new(),
        directory: false,
    }
}

/// The directories a recursive watch may follow.
pub const WATCH_LIMIT: usize = MAX_WATCHED_DIRECTORIES;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_through_their_argument() {
        let op = FileOp::Read {
            path: "a b/ü".into(),
            offset: 7,
            max_bytes: 9,
        };
        assert_eq!(decode_op(&encode_op(&op)), Some(op));
        assert_eq!(decode_op("zz"), None);
        assert_eq!(decode_op("0"), None);
        assert_eq!(decode_op("ü1"), None);
    }

    #[test]
    fn names_that_leave_the_directory_are_caught() {
        assert!(stays_inside(Path::new("a/b")));
        assert!(stays_inside(Path::new("./a")));
        assert!(!stays_inside(Path::new("../a")));
        assert!(!stays_inside(Path::new("a/../../b")));
        assert!(!stays_inside(Path::new("/etc/passwd")));
        assert!(!stays_inside(Path::new("")));
    }
}

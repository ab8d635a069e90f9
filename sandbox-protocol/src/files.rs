//! File operations through the agent ([`crate::Request::Files`]): information about a
//! path, a directory's entries, a file's bytes, a directory as a tar stream each way, and
//! a watch of a path's changes. The agent runs each in a helper process (its own binary)
//! as the sandbox's user, inside the container, so a file operation reaches nothing the
//! sandbox's own commands cannot.
//!
//! The connection stays framed. The agent sends the helper's output as
//! [`crate::Reply::Chunk`] frames (stream `Stdout`) and ends with [`crate::Reply::Done`] or
//! [`crate::Reply::Error`]. For an operation that takes input ([`FileOp::takes_input`]),
//! the host sends the bytes after its request as raw frames (not encoded messages) of at
//! most [`crate::MAX_CHUNK_BYTES`] each, and one empty frame at the end.
//!
//! What the output is, per operation:
//! - [`FileOp::Stat`]: one encoded [`FileInfo`];
//! - [`FileOp::List`]: one encoded [`Listing`];
//! - [`FileOp::Read`], [`FileOp::TarOut`]: the bytes themselves;
//! - [`FileOp::Write`], [`FileOp::TarIn`]: nothing;
//! - [`FileOp::Watch`]: an empty frame once the watch is up, then [`FileEvent`]s, each
//!   encoded behind a 4-byte big-endian length, until the host closes the connection.

use serde::{Deserialize, Serialize};

/// The longest path a file operation takes, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// The most entries a [`Listing`] holds (the rest are counted in
/// [`Listing::truncated`]).
pub const MAX_LIST_ENTRIES: usize = 10_000;
/// The most directories one recursive watch follows.
pub const MAX_WATCHED_DIRECTORIES: usize = 4096;
/// The largest encoded [`FileInfo`] or [`Listing`] the host reads (a listing of
/// [`MAX_LIST_ENTRIES`] names of 255 bytes fits).
pub const MAX_ANSWER_BYTES: usize = 4 << 20;
/// The largest encoded [`FileEvent`] (a path of [`MAX_PATH_BYTES`] and a little more).
pub const MAX_EVENT_BYTES: usize = MAX_PATH_BYTES + 64;

/// A file operation and who it runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesRequest {
    /// The operation.
    pub op: FileOp,
    /// As whom (see [`crate::ProcessSetup::user`]); the sandbox's user when `None`.
    pub user: Option<String>,
}

/// One file operation. A relative path is taken from the container's working directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileOp {
    /// What `path` is (not following a final symlink).
    Stat {
        /// The path.
        path: String,
    },
    /// A directory's entries, sorted by name.
    List {
        /// The directory.
        path: String,
    },
    /// Up to `max_bytes` of a regular file from `offset`.
    Read {
        /// The file.
        path: String,
        /// Where to start.
        offset: u64,
        /// How much at most.
        max_bytes: u64,
    },
    /// Writes the input to a file (made, with its parent directories, when missing).
    Write {
        /// The file.
        path: String,
        /// Append instead of replacing.
        append: bool,
    },
    /// A directory's contents (or one file) as a tar stream, names relative to it;
    /// symlinks are kept as links, never followed.
    TarOut {
        /// The directory or file.
        path: String,
    },
    /// Unpacks a tar stream (the input) into a directory, made when missing. An entry
    /// that would land outside it (an absolute name, `..`, a link out) is refused.
    TarIn {
        /// The directory.
        path: String,
    },
    /// Reports changes under `path` until the host closes the connection.
    Watch {
        /// The directory (or file) watched.
        path: String,
        /// Follow subdirectories too (at most [`MAX_WATCHED_DIRECTORIES`]).
        recursive: bool,
    },
}

impl FileOp {
    /// The path the operation is about.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Stat { path }
            | FileOp::List { path }
            | FileOp::Read { path, .. }
            | FileOp::Write { path, .. }
            | FileOp::TarOut { path }
            | FileOp::TarIn { path }
            | FileOp::Watch { path, .. } => path,
        }
    }

    /// Whether the host sends input after the request.
    pub fn takes_input(&self) -> bool {
        matches!(self, FileOp::Write { .. } | FileOp::TarIn { .. })
    }
}

/// What kind of thing a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// Anything else (a socket, a pipe, a device).
    Other,
}

impl FileKind {
    /// The kind's name in the host's API.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Directory => "directory",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        }
    }
}

/// One path's information. Names that are not UTF-8 are given lossily.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The last component.
    pub name: String,
    /// What it is.
    pub kind: FileKind,
    /// Its size in bytes.
    pub size: u64,
    /// Its permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Its owner's uid and gid.
    pub owner: (u32, u32),
    /// When it last changed, ms since the Unix epoch.
    pub modified_ms: u64,
    /// A symlink's target.
    pub link_target: Option<String>,
}

/// A directory's entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// At most [`MAX_LIST_ENTRIES`], sorted by name.
    pub entries: Vec<FileInfo>,
    /// Entries left out past [`MAX_LIST_ENTRIES`].
    pub truncated: u64,
}

/// What happened to a path under a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileEventKind {
    /// Made (or moved in).
    Create,
    /// Written to.
    Modify,
    /// Removed (or moved out).
    Delete,
    /// Events were lost (the kernel's queue overflowed): look again.
    Overflow,
}

impl FileEventKind {
    /// The kind's name in the host's API.
    pub fn as_str(self) -> &'static str {
        match self {
            FileEventKind::Create => "create",
            FileEventKind::Modify => "modify",
            FileEventKind::Delete => "delete",
            FileEventKind::Overflow => "overflow",
        }
    }
}

/// One change under a watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEvent {
    /// What happened.
    pub kind: FileEventKind,
    /// The path, relative to the watched one (empty: the watched path itself).
    pub path: String,
    /// The path is a directory.
    pub directory: bool,
}

/// Whether `path` is one a file operation takes: not empty, at most [`MAX_PATH_BYTES`],
/// no NUL.
pub fn valid_path(path: &str) -> bool {
    !path.is_empty() && path.len() <= MAX_PATH_BYTES && !path.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, decode, encode};

    #[test]
    fn file_requests_round_trip_and_paths_are_bounded() {
        let request = Request::Files(FilesRequest {
            op: FileOp::Watch {
                path: "src".into(),
                recursive: true,
            },
            user: Some("1000".into()),
        });
        assert_eq!(decode::<Request>(&encode(&request)).unwrap(), request);
        assert!(valid_path("a b/'c'"));
        assert!(!valid_path(""));
        assert!(!valid_path("a\0b"));
        assert!(!valid_path(&"x".repeat(MAX_PATH_BYTES + 1)));
        assert!(FileOp::TarIn { path: "d".into() }.takes_input());
        assert!(!FileOp::TarOut { path: "d".into() }.takes_input());
    }
}

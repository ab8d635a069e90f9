//! What the console lists of a session's sandbox: its processes (the sandbox agent's table)
//! and a directory, for the Files page: the sandbox agent's listing where the sandbox runs
//! one, else one `stat` run in the running container as its own user (so the sandbox's
//! permissions hold either way), its output read as untrusted text. Bounded:
//! [`MAX_ENTRIES`] entries, [`LIST_OUTPUT_BYTES`] of output, [`LIST_TIMEOUT_MS`] of run
//! time; a name is whatever bytes the sandbox printed, shown escaped.

use super::Wharf;
use super::session_sandbox::Lookup;
use crate::engines::container_types::ProcessInfo;
use crate::engines::sandbox_files::FileKind;
use crate::engines::{Command, ExecRequest};
use crate::error_code::{Code, WharfError};
use crate::tenant::Tenant;

/// Entries listed at most (the rest are counted as left off).
pub const MAX_ENTRIES: usize = 2000;
/// Output of the listing kept at most, bytes.
const LIST_OUTPUT_BYTES: u32 = 1 << 20;
/// How long the listing may run, ms.
const LIST_TIMEOUT_MS: u32 = 5_000;
/// The longest path a listing is asked for, bytes.
const MAX_PATH_BYTES: usize = 4096;

/// Lists `$1`: every entry, dot files too, one line each (`kind|size|mtime|name`). Exit 3
/// when `$1` is not a directory that can be entered.
const LIST_SCRIPT: &str = r#"cd -- "$1" 2>/dev/null || exit 3
set -- .* *
exec stat -c '%F|%s|%Y|%n' -- "$@" 2>/dev/null"#;

/// What a sandbox entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (downloadable).
    File,
    /// A directory (browsable).
    Directory,
    /// A symbolic link.
    Link,
    /// Anything else (device, socket, FIFO).
    Other,
}

/// One entry of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxEntry {
    /// Its name in the directory.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its size, bytes.
    pub size: u64,
    /// When it last changed, s since the epoch.
    pub modified_s: u64,
}

/// A listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxListing {
    /// The entries, directories first, then by name.
    pub entries: Vec<SandboxEntry>,
    /// Entries left off past [`MAX_ENTRIES`] (or lines that could not be read).
    pub left_off: usize,
}

impl Wharf {
    /// Lists directory `path` (absolute) in the running sandbox of `tenant`'s session `id`.
    /// 4007 for no such session, 4090 when paused, 4002 for no sandbox, a bad path or one
    /// that is not a directory.
    pub async fn list_sandbox_dir(
        &self,
        tenant: &Tenant,
        id: &str,
        path: &str,
    ) -> Result<SandboxListing, WharfError> {
        check_path(path)?;
        let record = self.session(tenant, id).await?;
        if let Ok(files) = self.files_of(&record).await {
            return match files.list(path).await {
                Ok(listing) => Ok(from_agent(listing)),
                Err(e) if matches!(e.code.as_u32(), 4000 | 4030) => Err(not_a_directory(path)),
                Err(e) => Err(e),
            };
        }
        let (owner, container) = self
            .running_sandbox(&record, Lookup::Remembered, "files")
            .await?;
        let request = ExecRequest::new(
            container,
            Command::Argv(vec![
                "/bin/sh".into(),
                "-c".into(),
                LIST_SCRIPT.into(),
                "sh".into(),
                path.into(),
            ]),
            LIST_TIMEOUT_MS,
            LIST_OUTPUT_BYTES,
        );
        let out = match self.services.containers.exec(&owner, request).await {
            Ok(out) => out,
            Err(e) => {
                // The remembered container may be gone: look it up once more next time.
                self.sandbox_targets.forget(id);
                return Err(e.into());
            }
        };
        if out.exit_code == Some(3) {
            return Err(not_a_directory(path));
        }
        if out.timed_out {
            return Err(WharfError::new(
                Code::Timeout,
                format!(
                    "listing `{}` took over {LIST_TIMEOUT_MS} ms",
                    path.escape_debug()
                ),
            ));
        }
        let mut listing = parse_listing(&out.stdout);
        listing.left_off += usize::from(out.stdout_truncated);
        Ok(listing)
    }

    /// The processes the sandbox agent of `tenant`'s session `id` started (running, and
    /// ended ones it still keeps), newest first. 4007, 4090 and 4002 as
    /// [`Wharf::list_sandbox_dir`]; 4030 on an engine that places no agent.
    pub async fn sandbox_processes(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Vec<ProcessInfo>, WharfError> {
        let record = self.session(tenant, id).await?;
        let (owner, container) = self
            .running_sandbox(&record, Lookup::Remembered, "processes")
            .await?;
        match self
            .services
            .containers
            .list_processes(&owner, &container)
            .await
        {
            Ok(mut list) => {
                list.sort_by_key(|p| std::cmp::Reverse(p.started_at_ms));
                Ok(list)
            }
            Err(e) => {
                self.sandbox_targets.forget(id);
                Err(e.into())
            }
        }
    }
}

fn not_a_directory(path: &str) -> WharfError {
    WharfError::invalid_request(format!(
        "`{}` is not a directory the sandbox can open",
        path.escape_debug()
    ))
}

/// The agent's listing (no shell run: the sandbox agent lists it as the sandbox's user),
/// in the console's order and bound.
fn from_agent(listing: crate::engines::sandbox_files::Listing) -> SandboxListing {
    let mut left_off = usize::try_from(listing.truncated).unwrap_or(usize::MAX);
    let mut entries: Vec<SandboxEntry> = listing
        .entries
        .into_iter()
        .map(|e| SandboxEntry {
            kind: match e.kind {
                FileKind::File => EntryKind::File,
                FileKind::Directory => EntryKind::Directory,
                FileKind::Symlink => EntryKind::Link,
                FileKind::Other => EntryKind::Other,
            },
            name: e.name,
            size: e.size,
            modified_s: e.modified_ms / 1000,
        })
        .collect();
    if entries.len() > MAX_ENTRIES {
        left_off = left_off.saturating_add(entries.len() - MAX_ENTRIES);
    }
    sort_entries(&mut entries);
    entries.truncate(MAX_ENTRIES);
    SandboxListing { entries, left_off }
}

fn sort_entries(entries: &mut [SandboxEntry]) {
    entries.sort_by(|a, b| {
        (a.kind != EntryKind::Directory, &a.name).cmp(&(b.kind != EntryKind::Directory, &b.name))
    });
}

/// A path the listing may be asked for: absolute, not too long, no NUL.
fn check_path(path: &str) -> Result<(), WharfError> {
    if !path.starts_with('/') || path.len() > MAX_PATH_BYTES || path.contains('\0') {
        return Err(WharfError::invalid_request(format!(
            "a sandbox path is absolute, at most {MAX_PATH_BYTES} bytes and has no NUL"
        )));
    }
    Ok(())
}

/// Reads the listing's output: lines that do not parse (a name with a newline, a
/// pattern that matched nothing) are counted as left off; `.` and `..` are dropped.
fn parse_listing(output: &[u8]) -> SandboxListing {
    let text = String::from_utf8_lossy(output);
    let mut entries = Vec::new();
    let mut left_off = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(4, '|');
        let (Some(kind), Some(size), Some(modified), Some(name)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            left_off += 1;
            continue;
        };
        let (Ok(size), Ok(modified_s)) = (size.parse::<u64>(), modified.parse::<u64>()) else {
            left_off += 1;
            continue;
        };
        if name == "." || name == ".." || name.is_empty() {
            continue;
        }
        if entries.len() >= MAX_ENTRIES {
            left_off += 1;
            continue;
        }
        let kind = match kind {
            "directory" => EntryKind::Directory,
            "symbolic link" => EntryKind::Link,
            k if k.starts_with("regular") => EntryKind::File,
            _ => EntryKind::Other,
        };
        entries.push(SandboxEntry {
            name: name.to_string(),
            kind,
            size,
            modified_s,
        });
    }
    sort_entries(&mut entries);
    SandboxListing { entries, left_off }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_reads_kinds_sizes_and_names_with_bars() {
        let out = b"directory|4096|1700000000|.\n\
directory|4096|1700000000|..\n\
regular file|12|1700000001|notes.txt\n\
regular empty file|0|1700000002|a|b\n\
directory|4096|1700000003|src\n\
symbolic link|7|1700000004|link\n\
fifo|0|1700000005|pipe\n\
stat: can't stat '*': No such file\n\
junk|x|1|bad\n";
        let listing = parse_listing(out);
        let names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["src", "a|b", "link", "notes.txt", "pipe"]);
        assert_eq!(listing.entries[1].kind, EntryKind::File);
        assert_eq!(listing.entries[2].kind, EntryKind::Link);
        assert_eq!(listing.entries[4].kind, EntryKind::Other);
        assert_eq!(listing.entries[3].size, 12);
        assert_eq!(listing.left_off, 2);
    }

    #[test]
    fn a_listing_is_bounded_and_paths_are_checked() {
        let out: String = (0..MAX_ENTRIES + 3)
            .map(|i| format!("regular file|1|1|f{i}\n"))
            .collect();
        let listing = parse_listing(out.as_bytes());
        assert_eq!((listing.entries.len(), listing.left_off), (MAX_ENTRIES, 3));
        assert!(check_path("/work").is_ok());
        for bad in ["work", "", "/a\0b"] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path(&format!("/{}", "a".repeat(MAX_PATH_BYTES))).is_err());
    }
}

//! The files helper's watch (`FileOp::Watch`): inotify on a path (and, when recursive, on
//! every directory under it, at most [`crate::file_helper::WATCH_LIMIT`]), each change
//! written to stdout as a length-prefixed [`FileEvent`] until the agent closes the pipe or
//! kills the helper. A queue overflow in the kernel is reported, not hidden.

use std::collections::HashMap;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use wharf_sandbox_protocol::{FileEvent, FileEventKind};

use crate::file_helper::{WATCH_LIMIT, overflow, write_event};

/// Why a watch ended.
pub enum WatchFailure {
    /// Setting it up failed: what, on which path, why.
    Io(&'static str, PathBuf, io::Error),
    /// Its output could not be written (the agent went away).
    Output(io::Error),
}

fn flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
}

/// The watches: descriptor → the directory's path relative to the watched root.
struct Watches {
    root: PathBuf,
    by_descriptor: HashMap<i32, PathBuf>,
}

impl Watches {
    fn add(&mut self, fd: &rustix::fd::OwnedFd, relative: PathBuf) -> io::Result<()> {
        if self.by_descriptor.len() >= WATCH_LIMIT {
            return Ok(());
        }
        let wd = inotify::add_watch(fd, self.root.join(&relative), flags())?;
        self.by_descriptor.insert(wd, relative);
        Ok(())
    }

    /// Adds `relative` and every directory under it, until the limit.
    fn add_tree(&mut self, fd: &rustix::fd::OwnedFd, relative: PathBuf) -> io::Result<()> {
        let mut pending = vec![relative];
        while let Some(dir) = pending.pop() {
            if self.by_descriptor.len() >= WATCH_LIMIT {
                break;
            }
            self.add(fd, dir.clone())?;
            let Ok(entries) = std::fs::read_dir(self.root.join(&dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(dir.join(entry.file_name()));
                }
            }
        }
        Ok(())
    }
}

/// Watches `path` until the output fails.
pub fn watch(path: &Path, recursive: bool, mut out: impl Write) -> Result<(), WatchFailure> {
    let fd = inotify::init(CreateFlags::CLOEXEC)
        .map_err(|e| WatchFailure::Io("watch", path.to_path_buf(), e.into()))?;
    let mut watches = Watches {
        root: path.to_path_buf(),
        by_descriptor: HashMap::new(),
    };
    let setup = if recursive && path.is_dir() {
        watches.add_tree(&fd, PathBuf::new())
    } else {
        watches.add(&fd, PathBuf::new())
    };
    setup.map_err(|e| WatchFailure::Io("watch", path.to_path_buf(), e))?;
    // An empty frame first: the watch is up, changes from now on are reported.
    out.write_all(&0u32.to_be_bytes())
        .and_then(|()| out.flush())
        .map_err(WatchFailure::Output)?;
    let mut buffer = [MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut reader = inotify::Reader::new(&fd, &mut buffer);
    loop {
        let event = match reader.next() {
            Ok(event) => event,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(WatchFailure::Io("watch", path.to_path_buf(), e.into())),
        };
        let events = event.events();
        if events.contains(ReadFlags::QUEUE_OVERFLOW) {
            write_event(&mut out, &overflow()).map_err(WatchFailure::Output)?;
            continue;
        }
        let Some(dir) = watches.by_descriptor.get(&event.wd()).cloned() else {
            continue;
        };
        let relative = match event.file_name() {
            Some(name) if !name.to_bytes().is_empty() => {
                dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()))
            }
            _ => dir.clone(),
        };
        let directory = events.contains(ReadFlags::ISDIR);
        let kind = if events.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
            if recursive && directory {
                // A directory made under the watch is followed too.
                let _ = watches.add_tree(&fd, relative.clone());
            }
            FileEventKind::Create
        } else if events.intersects(
            ReadFlags::DELETE
                | ReadFlags::MOVED_FROM
                | ReadFlags::DELETE_SELF
                | ReadFlags::MOVE_SELF,
        ) {
            FileEventKind::Delete
        } else if events.contains(ReadFlags::MODIFY) {
            FileEventKind::Modify
        } else {
            continue;
        };
        let event = FileEvent {
            kind,
            path: relative.to_string_lossy().into_owned(),
            directory,
        };
        write_event(&mut out, &event).map_err(WatchFailure::Output)?;
    }
}

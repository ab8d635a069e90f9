//! End to end: file operations through the built agent (`Request::Files`), driven through
//! the protocol like the host does: stat, list, read and write, directories as tar
//! streams both ways (hostile archives refused), and a watch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/harness.rs"]
mod support;

use std::path::Path;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio_util::bytes::Bytes;
use wharf_sandbox_protocol::{
    ErrorKind, FileEvent, FileEventKind, FileInfo, FileKind, FileOp, FilesRequest, Listing, Reply,
    Request, Stream, decode, encode,
};

use support::{Agent, connect, temp_dir};

fn files(op: FileOp) -> Request {
    Request::Files(FilesRequest { op, user: None })
}

/// The output of a file operation that takes no input, or its error.
async fn output(agent: &Agent, op: FileOp) -> Result<Vec<u8>, (ErrorKind, String)> {
    send(agent, op, &[]).await
}

/// Sends `input` (in chunks) after the request; the output, or the error.
async fn send(agent: &Agent, op: FileOp, input: &[u8]) -> Result<Vec<u8>, (ErrorKind, String)> {
    let takes_input = op.takes_input();
    let mut framed = connect(&agent.socket).await;
    framed.send(Bytes::from(encode(&files(op)))).await.unwrap();
    if takes_input {
        for chunk in input.chunks(100_000) {
            framed.send(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
        framed.send(Bytes::new()).await.unwrap();
    }
    let mut out = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), framed.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match decode::<Reply>(&frame).unwrap() {
            Reply::Chunk {
                stream: Stream::Stdout,
                data,
            } => out.extend_from_slice(&data),
            Reply::Done => return Ok(out),
            Reply::Error(e) => return Err((e.kind, e.message)),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[tokio::test]
async fn stat_list_read_and_write() {
    let agent = Agent::start();
    let dir = temp_dir("files-basic");
    let file = dir.join("a file 'q'");
    let written = send(
        &agent,
        FileOp::Write {
            path: path(&file),
            append: false,
        },
        b"hello ",
    )
    .await;
    assert_eq!(written, Ok(vec![]));
    send(
        &agent,
        FileOp::Write {
            path: path(&file),
            append: true,
        },
        b"world",
    )
    .await
    .unwrap();
    let read = output(
        &agent,
        FileOp::Read {
            path: path(&file),
            offset: 6,
            max_bytes: 100,
        },
    )
    .await
    .unwrap();
    assert_eq!(read, b"world");
    std::os::unix::fs::symlink("/etc", dir.join("out")).unwrap();
    let info: FileInfo = decode(
        &output(&agent, FileOp::Stat { path: path(&file) })
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!((info.kind, info.size), (FileKind::File, 11));
    let listing: Listing = decode(
        &output(&agent, FileOp::List { path: path(&dir) })
            .await
            .unwrap(),
    )
    .unwrap();
    let names: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind))
        .collect();
    assert_eq!(
        names,
        [("a file 'q'", FileKind::File), ("out", FileKind::Symlink)]
    );
    assert_eq!(listing.entries[1].link_target.as_deref(), Some("/etc"));
    // Refusals: a missing path, a directory read as a file, a bad path.
    let missing = output(
        &agent,
        FileOp::Stat {
            path: path(&dir.join("nope")),
        },
    )
    .await;
    assert_eq!(missing.unwrap_err().0, ErrorKind::NotFound);
    let directory = output(
        &agent,
        FileOp::Read {
            path: path(&dir),
            offset: 0,
            max_bytes: 1,
        },
    )
    .await;
    assert_eq!(directory.unwrap_err().0, ErrorKind::Invalid);
    let bad = output(
        &agent,
        FileOp::Stat {
            path: String::new(),
        },
    )
    .await;
    assert_eq!(bad.unwrap_err().0, ErrorKind::Invalid);
}

/// A tar stream with one entry whose raw name (and link name) is written as given, past
/// the tar crate's own checks.
fn hostile_tar(name: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    let raw = header.as_old_mut();
    raw.name[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(link) = link {
        raw.linkname[..link.len()].copy_from_slice(link.as_bytes());
    }
    header.set_cksum();
    let mut out = header.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512 + 1024, 0);
    out
}

#[tokio::test]
async fn directories_round_trip_and_hostile_archives_are_refused() {
    let agent = Agent::start();
    let source = temp_dir("files-src");
    std::fs::create_dir_all(source.join("sub/deeper")).unwrap();
    std::fs::write(
        source.join("sub/deeper/odd name\n\u{e9}"),
        b"x".repeat(300_000),
    )
    .unwrap();
    std::fs::write(source.join("top"), b"top").unwrap();
    std::os::unix::fs::symlink("../top", source.join("sub/link")).unwrap();
    let tar = output(
        &agent,
        FileOp::TarOut {
            path: path(&source),
        },
    )
    .await
    .unwrap();
    let target = temp_dir("files-dst").join("made");
    send(
        &agent,
        FileOp::TarIn {
            path: path(&target),
        },
        &tar,
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(target.join("sub/deeper/odd name\n\u{e9}"))
            .unwrap()
            .len(),
        300_000
    );
    assert_eq!(
        std::fs::read_link(target.join("sub/link")).unwrap(),
        Path::new("../top")
    );
    assert_eq!(std::fs::read(target.join("sub/link")).unwrap(), b"top");

    // Names that leave the directory, and a link out followed by an entry through it.
    let outside = temp_dir("files-outside");
    for archive in [
        hostile_tar("../escaped", tar::EntryType::Regular, None, b"x"),
        hostile_tar(
            &format!("{}/abs", path(&outside)),
            tar::EntryType::Regular,
            None,
            b"x",
        ),
        hostile_tar("hard", tar::EntryType::Link, Some("/etc/passwd"), b""),
    ] {
        let refused = send(
            &agent,
            FileOp::TarIn {
                path: path(&target),
            },
            &archive,
        )
        .await;
        assert_eq!(refused.unwrap_err().0, ErrorKind::Invalid);
    }
    let mut through = hostile_tar("way", tar::EntryType::Symlink, Some(&path(&outside)), b"");
    through.truncate(512);
    through.extend(hostile_tar(
        "way/planted",
        tar::EntryType::Regular,
        None,
        b"owned",
    ));
    let refused = send(
        &agent,
        FileOp::TarIn {
            path: path(&target),
        },
        &through,
    )
    .await;
    assert_eq!(
        refused.clone().unwrap_err().0,
        ErrorKind::Invalid,
        "{refused:?}"
    );
    assert!(!outside.join("planted").exists());
    assert!(!target.parent().unwrap().join("escaped").exists());
    // Not a tar stream at all.
    let garbage = send(
        &agent,
        FileOp::TarIn {
            path: path(&target),
        },
        &[7u8; 2000],
    )
    .await;
    assert_eq!(garbage.unwrap_err().0, ErrorKind::Invalid);
}

#[tokio::test]
async fn a_watch_reports_creates_modifies_and_deletes() {
    let agent = Agent::start();
    let dir = temp_dir("files-watch");
    std::fs::create_dir_all(dir.join("inner")).unwrap();
    let mut framed = connect(&agent.socket).await;
    let op = FileOp::Watch {
        path: path(&dir),
        recursive: true,
    };
    framed.send(Bytes::from(encode(&files(op)))).await.unwrap();
    let mut bytes = Vec::new();
    let mut events = Vec::new();
    let mut ready = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while events.len() < 3 {
        let frame = tokio::time::timeout_at(deadline, framed.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Reply::Chunk { data, .. } = decode::<Reply>(&frame).unwrap() else {
            panic!("not a chunk");
        };
        bytes.extend_from_slice(&data);
        while bytes.len() >= 4 {
            let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            if bytes.len() < 4 + len {
                break;
            }
            let frame: Vec<u8> = bytes.drain(..4 + len).skip(4).collect();
            if frame.is_empty() {
                ready = true;
                std::fs::write(dir.join("inner/new"), b"1").unwrap();
                std::fs::remove_file(dir.join("inner/new")).unwrap();
                continue;
            }
            events.push(decode::<FileEvent>(&frame).unwrap());
        }
    }
    assert!(ready);
    let seen: Vec<_> = events.iter().map(|e| (e.kind, e.path.as_str())).collect();
    assert_eq!(
        seen,
        [
            (FileEventKind::Create, "inner/new"),
            (FileEventKind::Modify, "inner/new"),
            (FileEventKind::Delete, "inner/new"),
        ]
    );
}

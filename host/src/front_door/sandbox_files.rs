//! Files of a session's sandbox through its agent (docs/agents.md, "Files"): what a path
//! is, a directory's entries, a directory out and in as a tar stream, and a watch of a
//! path's changes. The agent runs each operation as the sandbox's user, inside the
//! container; what it sends back is the sandbox's word, held to the protocol's bounds.
//! `api/files` is the adapter.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder as _, LengthDelimitedCodec};

use super::Wharf;
use super::session_sandbox::Lookup;
use crate::engines::sandbox_files::{
    self, FileEvent, FileInfo, FileInput, FileOp, FileOutput, Listing, MAX_ANSWER_BYTES,
    MAX_EVENT_BYTES,
};
use crate::engines::{ContainerEngine, Owner};
use crate::error_code::{Code, WharfError};
use crate::session_record::SessionRecord;
use crate::tenant::Tenant;

/// Watches open on this host at most; the next is refused (4290) until one ends.
pub const MAX_WATCHES: usize = 256;
/// How long a watch runs when the caller names no time, and at most.
pub const DEFAULT_WATCH_SECONDS: u64 = 300;
/// See [`DEFAULT_WATCH_SECONDS`].
pub const MAX_WATCH_SECONDS: u64 = 3600;
/// How long a watch may take to be set up (a recursive one walks the tree).
const WATCH_SETUP: Duration = Duration::from_secs(30);

/// A session's sandbox, reached for file operations.
pub struct SandboxFiles {
    engine: Arc<dyn ContainerEngine>,
    owner: Owner,
    container: String,
    stall: Duration,
    watch_slots: Arc<tokio::sync::Semaphore>,
}

fn malformed(what: &str) -> WharfError {
    WharfError::new(
        Code::ExecutionError,
        format!("the sandbox answered {what} that does not decode"),
    )
}

impl SandboxFiles {
    async fn run(&self, op: FileOp, input: Option<FileInput>) -> Result<FileOutput, WharfError> {
        Ok(self
            .engine
            .file_operation(&self.owner, &self.container, op, input, self.stall)
            .await?)
    }

    /// What `path` is (a final symlink is not followed; `path/` follows it).
    pub async fn info(&self, path: &str) -> Result<FileInfo, WharfError> {
        let output = self.run(FileOp::Stat { path: path.into() }, None).await?;
        let answer = sandbox_files::collect(output, MAX_ANSWER_BYTES).await?;
        wharf_sandbox_protocol::decode(&answer).map_err(|_| malformed("a path's information"))
    }

    /// A directory's entries, sorted by name.
    pub async fn list(&self, path: &str) -> Result<Listing, WharfError> {
        let output = self.run(FileOp::List { path: path.into() }, None).await?;
        let answer = sandbox_files::collect(output, MAX_ANSWER_BYTES).await?;
        wharf_sandbox_protocol::decode(&answer).map_err(|_| malformed("a listing"))
    }

    /// Up to `max_bytes` of regular file `path` from `offset` (a symlink is followed).
    pub async fn read(
        &self,
        path: &str,
        offset: u64,
        max_bytes: u64,
    ) -> Result<FileOutput, WharfError> {
        let op = FileOp::Read {
            path: path.into(),
            offset,
            max_bytes,
        };
        self.run(op, None).await
    }

    /// Writes `input` to file `path`, replacing it (its parent directories made when
    /// missing; a directory there is refused with 4000).
    pub async fn write(&self, path: &str, input: FileInput) -> Result<(), WharfError> {
        let op = FileOp::Write {
            path: path.into(),
            append: false,
        };
        let output = self.run(op, Some(input)).await?;
        sandbox_files::collect(output, 0).await?;
        Ok(())
    }

    /// A directory's contents as a tar stream (names relative to it, links kept).
    pub async fn tar_out(&self, path: &str) -> Result<FileOutput, WharfError> {
        self.run(FileOp::TarOut { path: path.into() }, None).await
    }

    /// Unpacks the tar stream `input` into directory `path` (made when missing); an entry
    /// that would land outside it is refused (4000).
    pub async fn tar_in(&self, path: &str, input: FileInput) -> Result<(), WharfError> {
        let output = self
            .run(FileOp::TarIn { path: path.into() }, Some(input))
            .await?;
        sandbox_files::collect(output, 0).await?;
        Ok(())
    }

    /// Watches `path` (and, when `recursive`, the directories under it) until the watch
    /// is dropped; returns once the watch is up.
    pub async fn watch(&self, path: &str, recursive: bool) -> Result<FileWatch, WharfError> {
        let slot = self.watch_slots.clone().try_acquire_owned().map_err(|_| {
            WharfError::new(
                Code::RateLimited,
                format!("this host has {MAX_WATCHES} watches open: end one first"),
            )
        })?;
        let op = FileOp::Watch {
            path: path.into(),
            recursive,
        };
        let mut watch = FileWatch {
            output: self.run(op, None).await?,
            pending: BytesMut::new(),
            frames: LengthDelimitedCodec::builder()
                .max_frame_length(MAX_EVENT_BYTES)
                .new_codec(),
            _slot: slot,
        };
        match tokio::time::timeout(WATCH_SETUP, watch.next_frame()).await {
            Ok(Ok(Some(frame))) if frame.is_empty() => Ok(watch),
            Ok(Err(e)) => Err(e),
            Ok(_) => Err(malformed("a watch")),
            Err(_) => Err(WharfError::new(
                Code::Timeout,
                format!("the watch of `{path}` was not set up within 30 s"),
            )),
        }
    }
}

/// An open watch: its events, in order. Holds one of the host's [`MAX_WATCHES`] slots.
pub struct FileWatch {
    output: FileOutput,
    pending: BytesMut,
    frames: LengthDelimitedCodec,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl FileWatch {
    /// The next event; `None` when the watch ended (the sandbox went away).
    pub async fn next(&mut self) -> Result<Option<FileEvent>, WharfError> {
        loop {
            match self.next_frame().await? {
                None => return Ok(None),
                // Only the first frame is empty; a sandbox that sends more is ignored.
                Some(frame) if frame.is_empty() => {}
                Some(frame) => {
                    return wharf_sandbox_protocol::decode(&frame)
                        .map(Some)
                        .map_err(|_| malformed("a change"));
                }
            }
        }
    }

    /// One length-prefixed frame of the helper's output.
    async fn next_frame(&mut self) -> Result<Option<Bytes>, WharfError> {
        loop {
            match self.frames.decode(&mut self.pending) {
                Ok(Some(frame)) => return Ok(Some(frame.freeze())),
                Ok(None) => {}
                Err(_) => return Err(malformed("a change longer than a path")),
            }
            match self.output.recv().await {
                Some(Ok(chunk)) => self.pending.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(None),
            }
        }
    }
}

impl Wharf {
    /// `tenant`'s sandbox session, reached for file operations through its agent: 4007
    /// when there is no such session, 4002 when its backend is no sandbox provider or it
    /// has no running sandbox, 4090 when it is paused or archived, 4030 when its sandbox
    /// runs no agent.
    pub async fn sandbox_files(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<SandboxFiles, WharfError> {
        let record = self.session(tenant, id).await?;
        if self.backend(&record.backend)?.behaviour().files().is_none() {
            return Err(WharfError::invalid_request(format!(
                "session `{id}` belongs to `{}`, which is not a sandbox provider",
                record.backend
            )));
        }
        self.files_of(&record).await
    }

    /// The same, for a session whose record the caller holds (a transfer under its turn).
    pub(super) async fn files_of(
        &self,
        record: &SessionRecord,
    ) -> Result<SandboxFiles, WharfError> {
        let (owner, container) = self
            // Asked afresh: a remembered container that was replaced would fail the
            // operation half-way, and a file operation costs more than the lookup.
            .running_sandbox(record, Lookup::Fresh, "files")
            .await?;
        let engine = self.services.containers.clone();
        if !engine.has_agent(&owner, &container).await {
            return Err(WharfError::new(
                Code::Forbidden,
                format!(
                    "session `{}`'s sandbox runs no sandbox agent: its files are reached one at a time through GET and PUT /v1/sessions/{{id}}/files",
                    record.id
                ),
            ));
        }
        Ok(SandboxFiles {
            engine,
            owner,
            container,
            stall: Duration::from_millis(self.server.upload_read_timeout_ms),
            watch_slots: self.watch_slots.clone(),
        })
    }
}

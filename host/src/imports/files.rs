//! `files` (contract 0.3.0): files in the caller's own containers, through the sandbox
//! agent the engine places in them, as the container's user and with no shell. It shares
//! `container`'s view: the same owner (backend, session), the same engine, answers counted
//! the same way. What a read may bring into host memory is the guest buffer cap, as for
//! `container.copy-out`; a write's content is what the guest already handed over.

use std::time::Duration;

use super::HostImportsView;
use super::container::{ContainerView, HasContainer};
use crate::engines::EngineError;
use crate::engines::sandbox_files::{self, FileKind, FileOp, MAX_ANSWER_BYTES};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::files::FileKind as GuestKind;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::files::{
    FileData, FileInfo, Host,
};
use wasmtime::component::Linker;

/// How long the agent may keep an answer waiting (it is read as it comes; a stalled one
/// ends the operation).
const STALL: Duration = Duration::from_secs(30);

/// Links `files` (0.3.0 on) on the `container` import's view.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::files::add_to_linker::<
        T,
        HasContainer,
    >(linker, HasContainer::view)?;
    Ok(())
}

type Answer<T> = wasmtime::Result<Result<T, Error>>;

fn guest_info(info: sandbox_files::FileInfo) -> FileInfo {
    FileInfo {
        name: info.name,
        kind: match info.kind {
            FileKind::File => GuestKind::File,
            FileKind::Directory => GuestKind::Directory,
            FileKind::Symlink => GuestKind::Symlink,
            FileKind::Other => GuestKind::Other,
        },
        size: info.size,
        mode: info.mode,
        modified_ms: info.modified_ms,
        link_target: info.link_target,
    }
}

fn decoded<T: serde::de::DeserializeOwned>(answer: &[u8], what: &str) -> Result<T, EngineError> {
    wharf_sandbox_protocol::decode(answer).map_err(|_| {
        EngineError::Failed(format!("the sandbox answered {what} that does not decode"))
    })
}

impl Host for ContainerView<'_> {
    async fn stat(&mut self, container: String, path: String) -> Answer<FileInfo> {
        self.engine_op("files.stat", async |engine, owner| {
            let output = engine
                .file_operation(&owner, &container, FileOp::Stat { path }, None, STALL)
                .await?;
            let answer = sandbox_files::collect(output, MAX_ANSWER_BYTES).await?;
            Ok(guest_info(decoded(&answer, "a path's information")?))
        })
        .await
    }

    async fn read(
        &mut self,
        container: String,
        path: String,
        offset: u64,
        max_bytes: u64,
    ) -> Answer<FileData> {
        let max_bytes = self.ctx.guest_buffer_cap.clamp(max_bytes);
        self.engine_op("files.read", async |engine, owner| {
            let stat = FileOp::Stat { path: path.clone() };
            let output = engine
                .file_operation(&owner, &container, stat, None, STALL)
                .await?;
            let info: sandbox_files::FileInfo = decoded(
                &sandbox_files::collect(output, MAX_ANSWER_BYTES).await?,
                "a path's information",
            )?;
            // Asked for no bytes (a file's size): the stat is the whole answer.
            let data = if max_bytes == 0 {
                Vec::new()
            } else {
                let op = FileOp::Read {
                    path,
                    offset,
                    max_bytes,
                };
                let output = engine
                    .file_operation(&owner, &container, op, None, STALL)
                    .await?;
                let cap = usize::try_from(max_bytes).unwrap_or(usize::MAX);
                sandbox_files::collect(output, cap).await?
            };
            // A symlink's own size is not its target's: the read tells the least.
            let size = if info.kind == FileKind::File {
                info.size
            } else {
                offset.saturating_add(data.len() as u64)
            };
            Ok(FileData { data, size })
        })
        .await
    }

    async fn write(
        &mut self,
        container: String,
        path: String,
        content: Vec<u8>,
        append: bool,
    ) -> Answer<()> {
        self.engine_op("files.write", async |engine, owner| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            // The one piece fits the channel: sent before the operation reads it.
            let _ = tx.try_send(bytes::Bytes::from(content));
            drop(tx);
            let op = FileOp::Write { path, append };
            let output = engine
                .file_operation(&owner, &container, op, Some(rx), STALL)
                .await?;
            sandbox_files::collect(output, 0).await?;
            Ok(())
        })
        .await
    }

    async fn list(&mut self, container: String, path: String) -> Answer<Vec<FileInfo>> {
        self.engine_op("files.list", async |engine, owner| {
            let output = engine
                .file_operation(&owner, &container, FileOp::List { path }, None, STALL)
                .await?;
            let answer = sandbox_files::collect(output, MAX_ANSWER_BYTES).await?;
            let listing: sandbox_files::Listing = decoded(&answer, "a listing")?;
            Ok(listing.entries.into_iter().map(guest_info).collect())
        })
        .await
    }
}

//! A sandbox session held for one file transfer (`GET`/`PUT /v1/sessions/{id}/files`): its
//! provider's file operations, the session as the provider sees it, its hard end, and its
//! turn (no other call runs in the session meanwhile, and dropping the transfer gives the
//! turn back). The adapter moves bytes; the provider stays behind the front door.

use super::Wharf;
use crate::error_code::WharfError;
use crate::runtime::guest_types::SessionView;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::tenant::Tenant;
use std::sync::Arc;

/// A sandbox session held for one transfer.
pub struct SandboxTransfer {
    backend: Arc<LoadedBackend>,
    session: SessionView,
    record: crate::session_record::SessionRecord,
    /// The session's hard end, ms since the epoch.
    pub ends_at_ms: Option<u64>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl SandboxTransfer {
    /// The size of every slice but the last.
    pub const SLICE_BYTES: u64 = crate::runtime::backend::SLICE_BYTES;

    fn files(&self) -> Result<&dyn crate::runtime::backend::SandboxFiles, WharfError> {
        self.backend.behaviour().files().ok_or_else(|| {
            WharfError::invalid_request(format!(
                "backend `{}` has no sandbox to move files in and out of",
                self.backend.name
            ))
        })
    }

    /// What is left of the session's lifetime, when it has a hard end.
    pub fn lifetime_left(&self) -> Option<std::time::Duration> {
        self.ends_at_ms
            .map(|end| std::time::Duration::from_millis(end.saturating_sub(crate::clock::now_ms())))
    }

    /// The size of `path` in the sandbox.
    pub async fn size(&self, path: &str) -> Result<u64, WharfError> {
        self.files()?.size(&self.session, path).await
    }

    /// Slice `index` of `path` ([`Self::SLICE_BYTES`] each, the last one shorter).
    pub async fn slice(&self, path: &str, index: u64) -> Result<Vec<u8>, WharfError> {
        self.files()?.slice(&self.session, path, index).await
    }

    /// Writes `content` to `path`, replacing it.
    pub async fn write(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        self.files()?.write(&self.session, path, content).await
    }

    /// Appends `content` to `path`.
    pub async fn append(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        self.files()?.append(&self.session, path, content).await
    }
}

impl Wharf {
    /// The held session's sandbox reached through its agent (4030 when it runs none), for
    /// directories moved under the session's turn.
    pub async fn transfer_files(
        &self,
        held: &SandboxTransfer,
    ) -> Result<super::sandbox_files::SandboxFiles, WharfError> {
        self.files_of(&held.record).await
    }

    /// A provider session of `tenant`, held for one file transfer (4007 when there is no
    /// such session, 4002 when its backend has no sandbox).
    pub async fn sandbox_transfer(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<SandboxTransfer, WharfError> {
        let (backend, record, turn) = self.sandbox_session(tenant, id).await?;
        Ok(SandboxTransfer {
            backend,
            ends_at_ms: record.max_expires_at_ms,
            session: record.view(),
            record,
            _turn: turn,
        })
    }
}

//! The sandbox-provider contract as host calls on a loaded provider: create, run-command,
//! destroy, is-alive, and the native file operations its features declare.

use crate::error_code::WharfError;
use crate::runtime::bindings::provider::exports::wharf::plugin::provider::{
    CommandRequest, CommandResult, DirEntry, FileChunk, SandboxSpec,
};
use crate::runtime::guest_ops::{Op, OpOutput};
use crate::runtime::loaded_backend::LoadedBackend;
use std::time::Duration;

fn mismatched() -> WharfError {
    WharfError::internal("the provider answered a different call")
}

impl LoadedBackend {
    /// Whether the provider declares a native feature (`read-file`, `write-file`, …).
    pub fn has_feature(&self, feature: &str) -> bool {
        self.description
            .provider_features
            .iter()
            .any(|f| f == feature)
    }

    /// Provisions a sandbox for `session_id`; returns its handle.
    pub async fn create_sandbox(
        &self,
        session_id: &str,
        spec: SandboxSpec,
        timeout: Duration,
    ) -> Result<String, WharfError> {
        match self
            .run(Op::Create(spec), Some(session_id), timeout, None)
            .await?
        {
            OpOutput::Created(handle) => Ok(handle),
            _ => Err(mismatched()),
        }
    }

    /// Runs a shell command in a sandbox.
    pub async fn run_command(
        &self,
        session_id: &str,
        sandbox: &str,
        request: CommandRequest,
        timeout: Duration,
    ) -> Result<CommandResult, WharfError> {
        match self
            .run(
                Op::RunCommand { sandbox, request },
                Some(session_id),
                timeout,
                None,
            )
            .await?
        {
            OpOutput::Command(result) => Ok(result),
            _ => Err(mismatched()),
        }
    }

    /// Destroys a sandbox (idempotent).
    pub async fn destroy_sandbox(
        &self,
        session_id: &str,
        sandbox: &str,
        timeout: Duration,
    ) -> Result<(), WharfError> {
        self.run(Op::Destroy(sandbox), Some(session_id), timeout, None)
            .await
            .map(|_| ())
    }

    /// Whether a sandbox still exists and answers.
    pub async fn sandbox_alive(
        &self,
        session_id: &str,
        sandbox: &str,
        timeout: Duration,
    ) -> Result<bool, WharfError> {
        match self
            .run(Op::IsAlive(sandbox), Some(session_id), timeout, None)
            .await?
        {
            OpOutput::Alive(alive) => Ok(alive),
            _ => Err(mismatched()),
        }
    }

    /// Native read (feature `read-file`).
    pub async fn native_read(
        &self,
        session_id: &str,
        sandbox: &str,
        path: &str,
        offset: u64,
        max_bytes: u64,
        timeout: Duration,
    ) -> Result<FileChunk, WharfError> {
        match self
            .run(
                Op::ReadFile {
                    sandbox,
                    path,
                    offset,
                    max_bytes,
                },
                Some(session_id),
                timeout,
                None,
            )
            .await?
        {
            OpOutput::Chunk(chunk) => Ok(chunk),
            _ => Err(mismatched()),
        }
    }

    /// Native write (feature `write-file`).
    pub async fn native_write(
        &self,
        session_id: &str,
        sandbox: &str,
        path: &str,
        content: Vec<u8>,
        timeout: Duration,
    ) -> Result<(), WharfError> {
        self.run(
            Op::WriteFile {
                sandbox,
                path,
                content,
            },
            Some(session_id),
            timeout,
            None,
        )
        .await
        .map(|_| ())
    }

    /// Native listing (feature `list-dir`).
    pub async fn native_list(
        &self,
        session_id: &str,
        sandbox: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<Vec<DirEntry>, WharfError> {
        match self
            .run(
                Op::ListDir { sandbox, path },
                Some(session_id),
                timeout,
                None,
            )
            .await?
        {
            OpOutput::Entries(entries) => Ok(entries),
            _ => Err(mismatched()),
        }
    }
}

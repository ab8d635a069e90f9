//! File operations on one sandbox: the provider's native ones when declared, otherwise
//! scripts over `run-command` (see [`super::shell`]).

use super::shell::{self, Entry};
use crate::error_code::{Code, WharfError};
use crate::runtime::guest_call::CallSite;
use crate::runtime::guest_types::{CommandRequest, CommandResult, EntryKind};
use crate::runtime::provider_component::ProviderComponent;
use base64::Engine as _;
use std::time::Duration;

/// One sandbox of one provider, for the duration of one tool call.
pub struct Sandbox<'a> {
    /// The provider.
    pub provider: &'a ProviderComponent,
    /// The tenant whose request this is.
    pub tenant: &'a std::sync::Arc<str>,
    /// The session that owns the sandbox.
    pub session_id: &'a str,
    /// The provider's handle.
    pub handle: &'a str,
    /// Time allowed for each provider call.
    pub timeout: Duration,
}

fn too_large(path: &str, size: Option<u64>) -> WharfError {
    let size = size.map(|s| format!(" ({s} bytes)")).unwrap_or_default();
    WharfError::new(
        Code::InvalidInput,
        format!(
            "`{path}` is larger than {} MiB{size}: use export_file or GET /v1/sessions/{{id}}/files?path=",
            shell::MAX_READ_BYTES >> 20
        ),
    )
}

/// Turns a script's exit status into the file error it stands for.
fn check_exit(result: &CommandResult, path: &str) -> Result<(), WharfError> {
    let invalid = |what: String| Err(WharfError::new(Code::InvalidInput, what));
    match result.exit_code {
        Some(0) => Ok(()),
        Some(shell::EXIT_MISSING) => invalid(format!("no such file or directory: `{path}`")),
        Some(shell::EXIT_DIRECTORY) => invalid(format!("`{path}` is a directory")),
        Some(shell::EXIT_NOT_REGULAR) => invalid(format!("`{path}` is not a regular file")),
        Some(shell::EXIT_NOT_DIRECTORY) => invalid(format!("`{path}` is not a directory")),
        None if result.timed_out => Err(WharfError::new(
            Code::Timeout,
            format!("the operation on `{path}` timed out"),
        )),
        other => Err(WharfError::new(
            Code::ExecutionError,
            format!(
                "the operation on `{path}` failed (exit {other:?}): {}",
                String::from_utf8_lossy(&result.stderr).trim()
            ),
        )),
    }
}

impl Sandbox<'_> {
    /// Each provider call's site: the session's, within the per-call time.
    pub(super) fn site(&self) -> CallSite<'_> {
        CallSite::in_session(self.tenant, self.session_id, self.timeout)
    }

    /// Runs a command; a sandbox the provider reports gone is 4007.
    pub async fn exec(
        &self,
        command: String,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
        max_output: u64,
    ) -> Result<CommandResult, WharfError> {
        self.exec_streamed(command, stdin, timeout, max_output, None)
            .await
    }

    /// Runs a command whose output also goes to `output` while it runs.
    pub async fn exec_streamed(
        &self,
        command: String,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
        max_output: u64,
        output: Option<&crate::call_output::OutputSink>,
    ) -> Result<CommandResult, WharfError> {
        if stdin.is_some() && !self.provider.features().stdin {
            return Err(WharfError::internal("this provider does not accept stdin"));
        }
        let request = CommandRequest {
            command,
            stdin,
            timeout_ms: timeout.as_millis().min(u32::MAX as u128) as u32,
            max_output_bytes: max_output.min(u32::MAX as u64) as u32,
        };
        // The provider call itself gets a little longer than the command it runs.
        let call_timeout = timeout + Duration::from_secs(5);
        let result = self
            .provider
            .run_command(
                CallSite {
                    output,
                    ..CallSite::in_session(self.tenant, self.session_id, call_timeout)
                },
                self.handle,
                request,
            )
            .await?;
        if result.sandbox_terminated {
            return Err(WharfError::session_not_found(
                "the session's sandbox is gone; create a new session",
            ));
        }
        Ok(result)
    }

    async fn script(
        &self,
        script: String,
        stdin: Option<Vec<u8>>,
        max_output: u64,
        path: &str,
    ) -> Result<Vec<u8>, WharfError> {
        let result = self.exec(script, stdin, self.timeout, max_output).await?;
        check_exit(&result, path)?;
        Ok(result.stdout)
    }

    /// The provider's native read, when it declares one and does not refuse it for this
    /// sandbox (4030: one without the sandbox agent, say); `None` sends the caller to the
    /// scripts.
    async fn native_read(
        &self,
        path: &str,
        offset: u64,
        max_bytes: u64,
    ) -> Option<Result<crate::runtime::guest_types::FileChunk, WharfError>> {
        if !self.provider.features().read_file {
            return None;
        }
        match self
            .provider
            .read_file(self.site(), self.handle, path, offset, max_bytes)
            .await
        {
            Err(e) if e.code == Code::Forbidden => None,
            other => Some(other),
        }
    }

    /// A whole file of at most [`shell::MAX_READ_BYTES`].
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, WharfError> {
        if let Some(chunk) = self.native_read(path, 0, shell::MAX_READ_BYTES + 1).await {
            let chunk = chunk?;
            if chunk.total_size > shell::MAX_READ_BYTES
                || chunk.data.len() as u64 > shell::MAX_READ_BYTES
            {
                return Err(too_large(path, Some(chunk.total_size)));
            }
            return Ok(chunk.data);
        }
        let out = self
            .script(
                shell::read_script(path),
                None,
                shell::MAX_READ_BYTES + 1,
                path,
            )
            .await?;
        if out.len() as u64 > shell::MAX_READ_BYTES {
            return Err(too_large(path, None));
        }
        Ok(out)
    }

    /// A file's size in bytes.
    pub async fn size(&self, path: &str) -> Result<u64, WharfError> {
        if let Some(chunk) = self.native_read(path, 0, 0).await {
            return Ok(chunk?.total_size);
        }
        let out = self
            .script(shell::size_script(path), None, 64, path)
            .await?;
        String::from_utf8_lossy(&out).trim().parse().map_err(|_| {
            WharfError::new(
                Code::ExecutionError,
                format!("could not read the size of `{path}`"),
            )
        })
    }

    /// Slice `index` of [`shell::SLICE_BYTES`]; a provider answering with more is refused.
    pub async fn slice(&self, path: &str, index: u64) -> Result<Vec<u8>, WharfError> {
        let data = self.slice_unchecked(path, index).await?;
        if data.len() as u64 > shell::SLICE_BYTES {
            return Err(WharfError::new(
                Code::ExecutionError,
                format!(
                    "the sandbox returned {} bytes for a slice of `{path}` (at most {})",
                    data.len(),
                    shell::SLICE_BYTES
                ),
            ));
        }
        Ok(data)
    }

    async fn slice_unchecked(&self, path: &str, index: u64) -> Result<Vec<u8>, WharfError> {
        let offset = index.saturating_mul(shell::SLICE_BYTES);
        if let Some(chunk) = self.native_read(path, offset, shell::SLICE_BYTES).await {
            return Ok(chunk?.data);
        }
        self.script(
            shell::slice_script(path, index),
            None,
            shell::SLICE_BYTES,
            path,
        )
        .await
    }

    /// Replaces a file's content.
    pub async fn write(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        if self.provider.features().write_file {
            return self
                .provider
                .write_file(self.site(), self.handle, path, content)
                .await;
        }
        self.write_over_shell(path, content, false).await
    }

    /// Appends to a file (for streamed uploads).
    pub async fn append(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        self.write_over_shell(path, content, true).await
    }

    async fn write_over_shell(
        &self,
        path: &str,
        content: Vec<u8>,
        append: bool,
    ) -> Result<(), WharfError> {
        if self.provider.features().stdin {
            self.script(
                shell::write_stdin_script(path, append),
                Some(content),
                4096,
                path,
            )
            .await?;
            return Ok(());
        }
        let mut first = !append;
        if content.is_empty() && first {
            self.script(shell::write_chunk_script(path, "", true), None, 4096, path)
                .await?;
        }
        for piece in content.chunks(shell::MAX_ARG_CHUNK) {
            let encoded = base64::engine::general_purpose::STANDARD.encode(piece);
            self.script(
                shell::write_chunk_script(path, &encoded, first),
                None,
                4096,
                path,
            )
            .await?;
            first = false;
        }
        Ok(())
    }

    /// A directory's entries.
    pub async fn list(&self, path: &str) -> Result<Vec<Entry>, WharfError> {
        let native = if self.provider.features().list_dir {
            match self.provider.list_dir(self.site(), self.handle, path).await {
                // Refused for this sandbox (one without the sandbox agent): the script lists it.
                Err(e) if e.code == Code::Forbidden => None,
                other => Some(other),
            }
        } else {
            None
        };
        if let Some(entries) = native {
            return Ok(entries?
                .into_iter()
                .map(|e| Entry {
                    name: e.name,
                    kind: match e.kind {
                        EntryKind::File => "file",
                        EntryKind::Directory => "directory",
                        EntryKind::Symlink => "symlink",
                        EntryKind::Other => "other",
                    }
                    .to_string(),
                    size: e.size,
                })
                .collect());
        }
        let out = self
            .script(shell::list_script(path), None, 16 << 20, path)
            .await?;
        let mut entries = shell::parse_list(&out);
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }
}

//! What the host asks of a container engine: the containers of one owner (a backend, and
//! within it a session), their lifecycle, commands in them and files in and out. Ownership
//! is the engine's to enforce: a container another backend made answers like a missing one.
//! Docker implements it (`docker::Docker`); [`DisabledEngine`] stands in on a host with no
//! engine.

use super::container_types::{
    ContainerInfo, ContainerSpec, EngineVolume, ExecOutput, ExecRequest, OutputChunk, OutputRead,
    Owner, PortStream, ProcessInfo, ProcessStart, Signal, SnapshotImage, SnapshotTarget,
    TerminalSize, VolumeUser,
};
use super::error::EngineError;
use super::sandbox_files::{FileInput, FileOp, FileOutput};
use crate::call_output::OutputSink;
use async_trait::async_trait;

/// A container engine. Every method is the caller's own business only: `owner` is derived
/// by the host from the call, never named by a guest.
#[async_trait]
pub trait ContainerEngine: std::fmt::Debug + Send + Sync {
    /// Ok when there is an engine to ask (whether it answers shows on the first call);
    /// [`EngineError::NotConfigured`] when there is none.
    fn configured(&self) -> Result<(), EngineError> {
        Ok(())
    }

    /// The isolation levels this engine is configured to give (`container`: its default
    /// runtime).
    fn isolation_levels(&self) -> Vec<crate::policy::Isolation> {
        vec![crate::policy::Isolation::Container]
    }

    /// Creates a container labelled for `owner` (not started).
    async fn create(
        &self,
        owner: &Owner,
        spec: &ContainerSpec,
    ) -> Result<ContainerInfo, EngineError>;

    /// Starts an owned container.
    async fn start(&self, owner: &Owner, id: &str) -> Result<(), EngineError>;

    /// Stops an owned container, killing it after `timeout_ms`.
    async fn stop(&self, owner: &Owner, id: &str, timeout_ms: u32) -> Result<(), EngineError>;

    /// Removes an owned container (running or not) with its anonymous volumes.
    async fn remove(&self, owner: &Owner, id: &str) -> Result<(), EngineError>;

    /// An owned container, or `None` when there is no such container of the owner's.
    async fn inspect(&self, owner: &Owner, id: &str) -> Result<Option<ContainerInfo>, EngineError>;

    /// The containers of `backend` (of one session of it when `session` is given).
    async fn list_owned(
        &self,
        backend: &str,
        session: Option<&str>,
    ) -> Result<Vec<ContainerInfo>, EngineError>;

    /// Every container the host labelled, of every backend and node (quotas, the reaper).
    async fn list_all(&self) -> Result<Vec<ContainerInfo>, EngineError>;

    /// Runs a command in an owned running container; dropping the future kills it.
    async fn exec(&self, owner: &Owner, request: ExecRequest) -> Result<ExecOutput, EngineError>;

    /// Like [`ContainerEngine::exec`], also passing the output to `output` as it is
    /// written when the engine can (the sandbox agent can; otherwise nothing is streamed
    /// and the result is the same).
    async fn exec_streamed(
        &self,
        owner: &Owner,
        request: ExecRequest,
        _output: &OutputSink,
    ) -> Result<ExecOutput, EngineError> {
        self.exec(owner, request).await
    }

    /// Writes one file into an owned container.
    async fn copy_in(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<(), EngineError>;

    /// Reads one regular file of at most `max_bytes` out of an owned container.
    async fn copy_out(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, EngineError>;

    /// Starts a background process in an owned container's sandbox agent. An engine that
    /// places no agent refuses every process operation (4030).
    async fn start_process(
        &self,
        _owner: &Owner,
        _id: &str,
        _start: ProcessStart,
    ) -> Result<ProcessInfo, EngineError> {
        Err(no_agent())
    }

    /// A background process's output from an offset, waiting for some when asked.
    async fn process_output(
        &self,
        _owner: &Owner,
        _id: &str,
        _read: OutputRead,
    ) -> Result<OutputChunk, EngineError> {
        Err(no_agent())
    }

    /// Writes to a background process's stdin, closing it after when `close`.
    async fn process_input(
        &self,
        _owner: &Owner,
        _id: &str,
        _pid: u32,
        _data: Vec<u8>,
        _close: bool,
    ) -> Result<(), EngineError> {
        Err(no_agent())
    }

    /// Signals a background process's process group.
    async fn signal_process(
        &self,
        _owner: &Owner,
        _id: &str,
        _pid: u32,
        _signal: Signal,
    ) -> Result<(), EngineError> {
        Err(no_agent())
    }

    /// Resizes a background process's terminal.
    async fn resize_process(
        &self,
        _owner: &Owner,
        _id: &str,
        _pid: u32,
        _size: TerminalSize,
    ) -> Result<(), EngineError> {
        Err(no_agent())
    }

    /// The background processes of an owned container, oldest first.
    async fn list_processes(
        &self,
        _owner: &Owner,
        _id: &str,
    ) -> Result<Vec<ProcessInfo>, EngineError> {
        Err(no_agent())
    }

    /// Freezes an owned running container with the engine's freezer (memory and processes
    /// kept, no CPU); a paused one stays paused.
    async fn pause(&self, _owner: &Owner, _id: &str) -> Result<(), EngineError> {
        Err(no_freezer())
    }

    /// Thaws an owned paused container; a running one stays running.
    async fn resume(&self, _owner: &Owner, _id: &str) -> Result<(), EngineError> {
        Err(no_freezer())
    }

    /// Commits an owned container's filesystem to `target` (its image's entrypoint, command,
    /// user and environment are the original image's, never the container's); the bytes the
    /// snapshot adds to its base image.
    async fn commit(
        &self,
        _owner: &Owner,
        _id: &str,
        _target: &SnapshotTarget,
    ) -> Result<u64, EngineError> {
        Err(no_snapshots())
    }

    /// Removes a snapshot image (not while a container uses it: refused). A missing one is
    /// `Ok`.
    async fn remove_snapshot(&self, _image: &str) -> Result<(), EngineError> {
        Err(no_snapshots())
    }

    /// Every snapshot image the engine holds (the sweep's view).
    async fn snapshot_images(&self) -> Result<Vec<SnapshotImage>, EngineError> {
        Ok(Vec::new())
    }

    /// Creates an engine volume named `name` with the host's `labels` (an existing one of
    /// that name is refused).
    async fn create_volume(
        &self,
        _name: &str,
        _labels: &[(String, String)],
    ) -> Result<(), EngineError> {
        Err(no_volumes())
    }

    /// Removes an engine volume the host made; one a container still uses (running or
    /// not) is refused with a message saying it is in use; a missing one is `Ok`.
    async fn remove_volume(&self, _name: &str) -> Result<(), EngineError> {
        Err(no_volumes())
    }

    /// Whether the engine holds the engine volume `name` (its create would otherwise make
    /// an empty one of that name for a mount).
    async fn has_volume(&self, _name: &str) -> Result<bool, EngineError> {
        Ok(false)
    }

    /// The bytes an engine volume's files hold now.
    async fn volume_bytes(&self, _name: &str) -> Result<u64, EngineError> {
        Err(no_volumes())
    }

    /// The containers (running or not) that mount an engine volume.
    async fn volume_users(&self, _name: &str) -> Result<Vec<VolumeUser>, EngineError> {
        Ok(Vec::new())
    }

    /// Every engine volume the host made (the sweep's view).
    async fn engine_volumes(&self) -> Result<Vec<EngineVolume>, EngineError> {
        Ok(Vec::new())
    }

    /// Removes the containers an unloaded backend made on this node outside any session
    /// (a stdio server its bridge ran, warm sandboxes); its ids. Sessions' containers stay
    /// with their sessions, and other nodes' with theirs.
    async fn remove_unloaded(&self, _backend: &str) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }

    /// A relay to TCP `port` on an owned container's loopback: the bytes of one connection
    /// to a server the sandbox runs (a preview), whatever the container's network.
    async fn connect_port(
        &self,
        _owner: &Owner,
        _id: &str,
        _port: u16,
    ) -> Result<PortStream, EngineError> {
        Err(EngineError::Refused(
            "this container engine runs no sandbox agent: a sandbox's ports cannot be reached"
                .into(),
        ))
    }

    /// Whether an owned, running container runs the sandbox agent (file operations,
    /// processes and port relays go through it).
    async fn has_agent(&self, _owner: &Owner, _id: &str) -> bool {
        false
    }

    /// A file operation in an owned container, run by its sandbox agent as the sandbox's
    /// user; `input` is sent first when the operation takes some. A chunk the consumer does
    /// not take within `stall` ends the operation.
    async fn file_operation(
        &self,
        _owner: &Owner,
        _id: &str,
        _op: FileOp,
        _input: Option<FileInput>,
        _stall: std::time::Duration,
    ) -> Result<FileOutput, EngineError> {
        Err(EngineError::Refused(
            "this container engine runs no sandbox agent: files cannot be reached through it"
                .into(),
        ))
    }
}

fn no_freezer() -> EngineError {
    EngineError::Refused("this container engine cannot pause containers".into())
}

fn no_snapshots() -> EngineError {
    EngineError::Refused("this container engine cannot snapshot containers".into())
}

fn no_volumes() -> EngineError {
    EngineError::Refused("this container engine keeps no volumes".into())
}

fn no_agent() -> EngineError {
    EngineError::Refused(
        "this container engine runs no sandbox agent: background processes are not available"
            .into(),
    )
}

/// The engine of a host that has none: every method answers
/// [`EngineError::NotConfigured`] (5012, not retryable).
#[derive(Debug, Clone, Copy, Default)]
pub struct DisabledEngine;

#[async_trait]
impl ContainerEngine for DisabledEngine {
    fn configured(&self) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    fn isolation_levels(&self) -> Vec<crate::policy::Isolation> {
        Vec::new()
    }

    async fn create(&self, _: &Owner, _: &ContainerSpec) -> Result<ContainerInfo, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn start(&self, _: &Owner, _: &str) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn stop(&self, _: &Owner, _: &str, _: u32) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn remove(&self, _: &Owner, _: &str) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn inspect(&self, _: &Owner, _: &str) -> Result<Option<ContainerInfo>, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn list_owned(
        &self,
        _: &str,
        _: Option<&str>,
    ) -> Result<Vec<ContainerInfo>, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn list_all(&self) -> Result<Vec<ContainerInfo>, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn exec(&self, _: &Owner, _: ExecRequest) -> Result<ExecOutput, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn copy_in(
        &self,
        _: &Owner,
        _: &str,
        _: &str,
        _: &[u8],
        _: u32,
    ) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn copy_out(&self, _: &Owner, _: &str, _: &str, _: u64) -> Result<Vec<u8>, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn pause(&self, _: &Owner, _: &str) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn resume(&self, _: &Owner, _: &str) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn commit(&self, _: &Owner, _: &str, _: &SnapshotTarget) -> Result<u64, EngineError> {
        Err(EngineError::NotConfigured)
    }

    async fn remove_snapshot(&self, _: &str) -> Result<(), EngineError> {
        Err(EngineError::NotConfigured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_disabled_engine_answers_5012_to_everything() {
        let engine: &dyn ContainerEngine = &DisabledEngine;
        let owner = Owner::backend("b");
        let id = "0".repeat(64);
        let errors = [
            engine.configured().unwrap_err(),
            engine
                .create(&owner, &ContainerSpec::default())
                .await
                .unwrap_err(),
            engine.start(&owner, &id).await.unwrap_err(),
            engine.stop(&owner, &id, 1).await.unwrap_err(),
            engine.remove(&owner, &id).await.unwrap_err(),
            engine.inspect(&owner, &id).await.unwrap_err(),
            engine.list_owned("b", None).await.unwrap_err(),
            engine.list_all().await.unwrap_err(),
            engine
                .exec(
                    &owner,
                    ExecRequest::new(&id, crate::engines::Command::Shell("true".into()), 1, 1),
                )
                .await
                .unwrap_err(),
            engine
                .copy_in(&owner, &id, "/f", b"x", 0o644)
                .await
                .unwrap_err(),
            engine.copy_out(&owner, &id, "/f", 1).await.unwrap_err(),
        ];
        for e in errors {
            assert_eq!((e.code(), e.retryable()), (5012, false), "{e}");
            assert_eq!(
                e.to_string(),
                "no container engine is configured on this host"
            );
        }
    }
}

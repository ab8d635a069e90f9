//! Docker as the host's [`ContainerEngine`]: the client's own methods (and, for a
//! process's stdin, signals and terminal size, one agent request each), behind the seam
//! the imports, the sweeps and the reaper call.

use super::agent_processes::input_request;
use super::client::Docker;
use super::error::DockerError;
use super::types::{ContainerInfo, ContainerSpec, ExecOutput, ExecRequest, Owner};
use crate::engines::ContainerEngine;
use crate::engines::container_types::{
    EngineVolume, OutputChunk, OutputRead, ProcessInfo, ProcessStart, Signal, SnapshotImage,
    SnapshotTarget, TerminalSize, VolumeUser,
};
use crate::engines::sandbox_files::{FileInput, FileOp, FileOutput};
use async_trait::async_trait;
use wharf_sandbox_protocol::Request;

#[async_trait]
impl ContainerEngine for Docker {
    fn isolation_levels(&self) -> Vec<crate::policy::Isolation> {
        Docker::isolation_levels(self)
    }

    async fn create(
        &self,
        owner: &Owner,
        spec: &ContainerSpec,
    ) -> Result<ContainerInfo, DockerError> {
        Docker::create(self, owner, spec).await
    }

    async fn start(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        Docker::start(self, owner, id).await
    }

    async fn stop(&self, owner: &Owner, id: &str, timeout_ms: u32) -> Result<(), DockerError> {
        Docker::stop(self, owner, id, timeout_ms).await
    }

    async fn remove(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        Docker::remove(self, owner, id).await
    }

    async fn inspect(&self, owner: &Owner, id: &str) -> Result<Option<ContainerInfo>, DockerError> {
        Docker::inspect(self, owner, id).await
    }

    async fn pause(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        Docker::pause(self, owner, id).await
    }

    async fn resume(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        Docker::resume(self, owner, id).await
    }

    async fn commit(
        &self,
        owner: &Owner,
        id: &str,
        target: &SnapshotTarget,
    ) -> Result<u64, DockerError> {
        Docker::commit(self, owner, id, target).await
    }

    async fn remove_snapshot(&self, image: &str) -> Result<(), DockerError> {
        Docker::remove_snapshot(self, image).await
    }

    async fn snapshot_images(&self) -> Result<Vec<SnapshotImage>, DockerError> {
        Docker::snapshot_images(self).await
    }

    async fn create_volume(
        &self,
        name: &str,
        labels: &[(String, String)],
    ) -> Result<(), DockerError> {
        Docker::create_volume(self, name, labels).await
    }

    async fn remove_volume(&self, name: &str) -> Result<(), DockerError> {
        Docker::remove_volume(self, name).await
    }

    async fn has_volume(&self, name: &str) -> Result<bool, DockerError> {
        Docker::has_volume(self, name).await
    }

    async fn volume_bytes(&self, name: &str) -> Result<u64, DockerError> {
        Docker::volume_bytes(self, name).await
    }

    async fn volume_users(&self, name: &str) -> Result<Vec<VolumeUser>, DockerError> {
        Docker::volume_users(self, name).await
    }

    async fn engine_volumes(&self) -> Result<Vec<EngineVolume>, DockerError> {
        Docker::engine_volumes(self).await
    }

    async fn remove_unloaded(&self, backend: &str) -> Result<Vec<String>, DockerError> {
        Docker::remove_unloaded(self, backend).await
    }

    async fn list_owned(
        &self,
        backend: &str,
        session: Option<&str>,
    ) -> Result<Vec<ContainerInfo>, DockerError> {
        Docker::list_owned(self, backend, session).await
    }

    async fn list_all(&self) -> Result<Vec<ContainerInfo>, DockerError> {
        self.list_all_wharf().await
    }

    async fn exec(&self, owner: &Owner, request: ExecRequest) -> Result<ExecOutput, DockerError> {
        Docker::exec(self, owner, request).await
    }

    async fn exec_streamed(
        &self,
        owner: &Owner,
        request: ExecRequest,
        output: &crate::call_output::OutputSink,
    ) -> Result<ExecOutput, DockerError> {
        Docker::exec_streamed(self, owner, request, Some(output)).await
    }

    async fn copy_in(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<(), DockerError> {
        Docker::copy_in(self, owner, id, path, content, mode).await
    }

    async fn copy_out(
        &self,
        owner: &Owner,
        id: &str,
        path: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, DockerError> {
        Docker::copy_out(self, owner, id, path, max_bytes).await
    }

    async fn has_agent(&self, owner: &Owner, id: &str) -> bool {
        matches!(self.agent_of(owner, id).await, Ok(Some(_)))
    }

    async fn file_operation(
        &self,
        owner: &Owner,
        id: &str,
        op: FileOp,
        input: Option<FileInput>,
        stall: std::time::Duration,
    ) -> Result<FileOutput, DockerError> {
        Docker::file_operation(self, owner, id, op, input, stall).await
    }

    async fn start_process(
        &self,
        owner: &Owner,
        id: &str,
        start: ProcessStart,
    ) -> Result<ProcessInfo, DockerError> {
        Docker::start_process(self, owner, id, start).await
    }

    async fn process_output(
        &self,
        owner: &Owner,
        id: &str,
        read: OutputRead,
    ) -> Result<OutputChunk, DockerError> {
        Docker::process_output(self, owner, id, read).await
    }

    async fn process_input(
        &self,
        owner: &Owner,
        id: &str,
        pid: u32,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), DockerError> {
        self.tell_agent(owner, id, input_request(pid, data, close)?)
            .await
    }

    async fn signal_process(
        &self,
        owner: &Owner,
        id: &str,
        pid: u32,
        signal: Signal,
    ) -> Result<(), DockerError> {
        self.tell_agent(owner, id, Request::Signal { pid, signal })
            .await
    }

    async fn resize_process(
        &self,
        owner: &Owner,
        id: &str,
        pid: u32,
        size: TerminalSize,
    ) -> Result<(), DockerError> {
        self.tell_agent(owner, id, Request::Resize { pid, size })
            .await
    }

    async fn list_processes(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Vec<ProcessInfo>, DockerError> {
        Docker::list_processes(self, owner, id).await
    }

    async fn connect_port(
        &self,
        owner: &Owner,
        id: &str,
        port: u16,
    ) -> Result<crate::engines::container_types::PortStream, DockerError> {
        Docker::connect_port(self, owner, id, port).await
    }
}

//! Docker as the host's [`ContainerEngine`]: the client's own methods, behind the seam the
//! imports, the sweeps and the reaper call.

use super::client::Docker;
use super::error::DockerError;
use super::types::{ContainerInfo, ContainerSpec, ExecOutput, ExecRequest, Owner};
use crate::engines::ContainerEngine;
use async_trait::async_trait;

#[async_trait]
impl ContainerEngine for Docker {
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
}

//! `container`: containers on the host's engine. Not granted until the Docker imports land;
//! answers 4030.

use super::not_granted;
use crate::runtime::bindings::backend::wharf::plugin::container::{ContainerInfo, ContainerSpec, Host};
use crate::runtime::bindings::wit_types::Error;
use crate::runtime::host_state::HostState;

type Answer<T> = wasmtime::Result<Result<T, Error>>;

impl Host for HostState {
    async fn create(&mut self, _spec: ContainerSpec) -> Answer<ContainerInfo> {
        Ok(Err(not_granted("container")))
    }
    async fn start(&mut self, _id: String) -> Answer<()> {
        Ok(Err(not_granted("container")))
    }
    async fn stop(&mut self, _id: String, _timeout_ms: u32) -> Answer<()> {
        Ok(Err(not_granted("container")))
    }
    async fn remove(&mut self, _id: String) -> Answer<()> {
        Ok(Err(not_granted("container")))
    }
    async fn inspect(&mut self, _id: String) -> Answer<Option<ContainerInfo>> {
        Ok(Err(not_granted("container")))
    }
    async fn list_owned(&mut self, _session_id: Option<String>) -> Answer<Vec<ContainerInfo>> {
        Ok(Err(not_granted("container")))
    }
    async fn copy_in(&mut self, _id: String, _path: String, _content: Vec<u8>, _mode: u32) -> Answer<()> {
        Ok(Err(not_granted("container")))
    }
    async fn copy_out(&mut self, _id: String, _path: String, _max_bytes: u64) -> Answer<Vec<u8>> {
        Ok(Err(not_granted("container")))
    }
}

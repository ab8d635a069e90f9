//! `exec`: commands in the caller's own containers. Not granted until the container
//! imports land; answers 4030.

use super::not_granted;
use crate::runtime::bindings::backend::wharf::plugin::exec::{ExecOutput, ExecRequest, Host};
use crate::runtime::bindings::wit_types::Error;
use crate::runtime::host_state::HostState;

impl Host for HostState {
    async fn run(&mut self, _request: ExecRequest) -> wasmtime::Result<Result<ExecOutput, Error>> {
        Ok(Err(not_granted("exec")))
    }
}

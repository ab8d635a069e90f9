//! `kv`: durable key-value state. Not granted until the state store lands; every call
//! answers 4030 so backends built against the contract already compile and degrade cleanly.

use super::not_granted;
use crate::runtime::bindings::backend::wharf::plugin::kv::{Host, Scope};
use crate::runtime::bindings::wit_types::Error;
use crate::runtime::host_state::HostState;

impl Host for HostState {
    async fn get(&mut self, _scope: Scope, _key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(Err(not_granted("kv")))
    }
    async fn set(&mut self, _scope: Scope, _key: String, _value: Vec<u8>) -> wasmtime::Result<Result<(), Error>> {
        Ok(Err(not_granted("kv")))
    }
    async fn delete(&mut self, _scope: Scope, _key: String) -> wasmtime::Result<Result<(), Error>> {
        Ok(Err(not_granted("kv")))
    }
    async fn list_keys(&mut self, _scope: Scope, _prefix: String) -> wasmtime::Result<Result<Vec<String>, Error>> {
        Ok(Err(not_granted("kv")))
    }
}

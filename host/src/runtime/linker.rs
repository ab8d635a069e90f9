//! The one linker every component is instantiated through: WASI with nothing granted, and
//! the host imports of every served contract version (`imports::add_to_linker`: outbound
//! `wasi:http` and the `wharf:plugin` interfaces, 0.1.0's through `imports::v0_1`).

use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::Linker;

/// Builds the linker.
pub fn linker(engine: &Engine) -> Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    crate::imports::add_to_linker(&mut linker)?;
    Ok(linker)
}

//! The one linker every component is instantiated through: WASI with nothing granted, and
//! the host imports of every served contract version: outbound `wasi:http`, the
//! `wharf:plugin` interfaces that still implement `Host` on `HostState` (0.1.0's through
//! `imports::v0_1`), and those in `wasi-http`'s shape (`imports::add_to_linker`).

use crate::runtime::bindings::{v0_1, v0_2};
use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

/// Builds the linker.
pub fn linker(engine: &Engine) -> Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    add_state_imports(&mut linker)?;
    crate::imports::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// The imports whose `Host` is still `HostState`, each for every version it serves.
fn add_state_imports(linker: &mut Linker<HostState>) -> Result<()> {
    type H = HasSelf<HostState>;
    // `types`, the records the other interfaces share (nothing to call).
    v0_2::backend::wharf::plugin0_2_0::types::add_to_linker::<HostState, H>(linker, |s| s)?;
    v0_1::backend::wharf::plugin0_1_0::types::add_to_linker::<HostState, H>(linker, |s| s)?;
    crate::imports::http::add_to_linker(linker)?;
    Ok(())
}

impl v0_2::backend::wharf::plugin0_2_0::types::Host for HostState {}
impl v0_1::backend::wharf::plugin0_1_0::types::Host for HostState {}

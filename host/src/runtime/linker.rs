//! The one linker every component is instantiated through: WASI with nothing granted,
//! outbound `wasi:http`, and the host imports of every served contract version (0.1.0's
//! through the adapters in `imports::v0_1`).

use crate::runtime::bindings::{v0_1, v0_2};
use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

/// Builds the linker.
pub fn linker(engine: &Engine) -> Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    {
        use v0_2::backend::wharf::plugin as wit;
        type H = HasSelf<HostState>;
        wit::types::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::log::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::kv::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::container::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::exec::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::egress::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
    }
    {
        use v0_1::backend::wharf::plugin as wit;
        type H = HasSelf<HostState>;
        wit::types::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::log::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::kv::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::container::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
        wit::exec::add_to_linker::<HostState, H>(&mut linker, |s| s)?;
    }
    Ok(linker)
}

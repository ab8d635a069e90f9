//! `cancellation` (contract 0.3.0): whether the call in progress is still wanted. The
//! protocol adapter fires the call's token when its caller gives up (`api/mcp/call`), and
//! the call gets a moment to end; a guest that waits on `wasi:io` pollables (the bridge's
//! HTTP client) asks here between short waits.

use super::{HasView, HostImportsView, View};
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::cancellation::Host;
use wasmtime::component::Linker;

/// What one call of `cancellation` sees: the call in progress and the counter. It has no
/// context of its own.
pub type CancellationView<'a> = View<'a, ()>;

/// Links `cancellation` (0.3.0 on).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::cancellation::add_to_linker::<
        T,
        HasView<()>,
    >(linker, HasView::view)?;
    Ok(())
}

impl Host for CancellationView<'_> {
    async fn cancelled(&mut self) -> wasmtime::Result<bool> {
        self.counter.record("cancellation.cancelled", true);
        Ok(self
            .call
            .cancel
            .as_ref()
            .is_some_and(|token| token.is_cancelled()))
    }
}

//! `cancellation` (contract 0.3.0): whether the call in progress is still wanted. The
//! protocol adapter fires the call's token when its caller gives up (`api/mcp/call`), and
//! the call gets a moment to end; a guest that waits on `wasi:io` pollables (the bridge's
//! HTTP client) asks here between short waits.

use super::{CallContext, HostImportsView, ImportCounter};
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::cancellation::Host;
use wasmtime::component::{HasData, Linker};

/// What one call of `cancellation` sees: the call in progress and the counter. It has no
/// context of its own.
pub struct CancellationView<'a> {
    call: &'a CallContext,
    counter: &'a ImportCounter,
}

struct HasCancellation;

impl HasData for HasCancellation {
    type Data<'a> = CancellationView<'a>;
}

fn view<T: HostImportsView>(state: &mut T) -> CancellationView<'_> {
    let imports = state.host_imports();
    CancellationView {
        call: imports.call,
        counter: imports.contexts.counter(),
    }
}

/// Links `cancellation` (0.3.0 on).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::cancellation::add_to_linker::<
        T,
        HasCancellation,
    >(linker, view::<T>)?;
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

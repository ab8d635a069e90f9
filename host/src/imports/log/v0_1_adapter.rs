//! `log` for `wharf:plugin@0.1.0` components, on the current implementation
//! (`imports::v0_1` has what the adapters share).

use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;

impl old::log::Host for super::LogView<'_> {
    async fn log(&mut self, level: old::log::Level, message: String) -> wasmtime::Result<()> {
        use new::log::Level as L;
        use old::log::Level as O;
        let level = match level {
            O::Trace => L::Trace,
            O::Debug => L::Debug,
            O::Info => L::Info,
            O::Warn => L::Warn,
            O::Error => L::Error,
        };
        new::log::Host::log(self, level, message).await
    }
}

//! What the `wharf:plugin@0.1.0` adapters share. Each adapter lives beside its import
//! (`imports/NAME/v0_1_adapter.rs`): it converts its 0.1.0 records to 0.2.0's (the same
//! shape), calls the import's `Host` on the same view, and converts the answer back. 0.1.0
//! has no `egress`, `secrets`, `kv.increment`, `kv.compare-and-swap` or `log.panic`, so
//! nothing reaches them.

use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;

/// A 0.1.0 import's answer.
pub(super) type Answer<T> = wasmtime::Result<Result<T, old::types::Error>>;

fn error(e: new::types::Error) -> old::types::Error {
    old::types::Error {
        code: e.code,
        message: e.message,
        retryable: e.retryable,
        data: e.data,
    }
}

/// A 0.2.0 answer as 0.1.0's, its value converted by `f`.
pub(super) fn answer<A, B>(
    r: wasmtime::Result<Result<A, new::types::Error>>,
    f: impl FnOnce(A) -> B,
) -> Answer<B> {
    Ok(r?.map(f).map_err(error))
}

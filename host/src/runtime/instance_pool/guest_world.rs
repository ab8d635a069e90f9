//! What a pool makes instances of: a pre-instantiated component of one world, whatever
//! contract version it serves, with the hooks every world has.

use crate::runtime::guest_types::GuestError;
use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::{Engine, Store};

/// A boxed future, for the few guest calls a pool makes without knowing the world.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A pre-instantiated component of one world (of any served contract version): what a
/// pool makes instances of, and the hooks every world has.
pub trait GuestWorld: Clone + Send + Sync + 'static {
    /// The exports of one instance.
    type Exports: Send + Sync + 'static;
    /// The engine it was compiled for.
    fn engine(&self) -> &Engine;
    /// A new instance in `store`.
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, Result<Self::Exports>>;
    /// `warmup(config)`.
    fn warmup<'a>(
        exports: &'a Self::Exports,
        store: &'a mut Store<HostState>,
        config: &'a str,
    ) -> BoxFuture<'a, wasmtime::Result<Result<(), GuestError>>>;
    /// `shutdown()`.
    fn shutdown<'a>(
        exports: &'a Self::Exports,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<()>>;
}

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

/// Declares a world's two faces over every served contract version — `$Pre`, the
/// pre-instantiated component, and `$Exports`, one instance's exports, each an enum with
/// one variant per export shape (0.1.0's, and 0.2.0's, which 0.3.0 exports as it is) — and
/// implements [`GuestWorld`] for them, so the provider and resource worlds share one
/// definition of what differs only in names. `$get01`/`$get02` name the generated
/// accessor of the world's export interface in each version.
macro_rules! versioned_guest_world {
    (
        $what:literal,
        $Pre:ident, $Exports:ident,
        V0_1: $Pre01:ty, $Ex01:ty, $get01:ident;
        V0_2: $Pre02:ty, $Ex02:ty, $get02:ident;
    ) => {
        #[doc = concat!("A pre-instantiated ", $what, ".")]
        #[derive(Clone)]
        pub enum $Pre {
            /// Built against 0.1.0.
            V0_1($Pre01),
            /// Built against 0.2.0 or 0.3.0 (whose export is 0.2.0's).
            V0_2($Pre02),
        }

        #[doc = concat!("One instance's exports of a ", $what, ".")]
        pub enum $Exports {
            /// Built against 0.1.0.
            V0_1($Ex01),
            /// Built against 0.2.0 or 0.3.0.
            V0_2($Ex02),
        }

        impl $Pre {
            /// Wraps an `InstancePre` of a component built against `version`.
            pub fn new(
                version: $crate::runtime::world::ContractVersion,
                pre: wasmtime::component::InstancePre<$crate::runtime::host_state::HostState>,
            ) -> anyhow::Result<Self> {
                use $crate::runtime::world::ContractVersion as V;
                Ok(match version {
                    V::V0_1 => Self::V0_1(<$Pre01>::new(pre)?),
                    V::V0_2 | V::V0_3 => Self::V0_2(<$Pre02>::new(pre)?),
                })
            }
        }

        impl $crate::runtime::instance_pool::GuestWorld for $Pre {
            type Exports = $Exports;

            fn engine(&self) -> &wasmtime::Engine {
                match self {
                    Self::V0_1(p) => p.engine(),
                    Self::V0_2(p) => p.engine(),
                }
            }

            fn instantiate<'a>(
                &'a self,
                store: &'a mut wasmtime::Store<$crate::runtime::host_state::HostState>,
            ) -> $crate::runtime::instance_pool::BoxFuture<'a, anyhow::Result<$Exports>> {
                Box::pin(async move {
                    Ok(match self {
                        Self::V0_1(p) => $Exports::V0_1(p.instantiate_async(store).await?),
                        Self::V0_2(p) => $Exports::V0_2(p.instantiate_async(store).await?),
                    })
                })
            }

            fn warmup<'a>(
                exports: &'a $Exports,
                store: &'a mut wasmtime::Store<$crate::runtime::host_state::HostState>,
                config: &'a str,
            ) -> $crate::runtime::instance_pool::BoxFuture<
                'a,
                wasmtime::Result<Result<(), $crate::runtime::guest_types::GuestError>>,
            > {
                Box::pin(async move {
                    Ok(match exports {
                        $Exports::V0_1(e) => e
                            .$get01()
                            .call_warmup(&mut *store, config)
                            .await?
                            .map_err(Into::into),
                        $Exports::V0_2(e) => e
                            .$get02()
                            .call_warmup(&mut *store, config)
                            .await?
                            .map_err(Into::into),
                    })
                })
            }

            fn shutdown<'a>(
                exports: &'a $Exports,
                store: &'a mut wasmtime::Store<$crate::runtime::host_state::HostState>,
            ) -> $crate::runtime::instance_pool::BoxFuture<'a, wasmtime::Result<()>> {
                Box::pin(async move {
                    match exports {
                        $Exports::V0_1(e) => e.$get01().call_shutdown(&mut *store).await,
                        $Exports::V0_2(e) => e.$get02().call_shutdown(&mut *store).await,
                    }
                })
            }
        }
    };
}
pub(crate) use versioned_guest_world;

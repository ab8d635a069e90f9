//! What a pool makes instances of: a pre-instantiated component of one world, whatever
//! contract version it serves, with the hooks every world has; and what the two worlds'
//! version wrappers share.

use crate::runtime::guest_types::Answer;
use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::component::{Instance, InstancePre};
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
    ) -> BoxFuture<'a, Answer<()>>;
    /// `shutdown()`.
    fn shutdown<'a>(
        exports: &'a Self::Exports,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<()>>;
}

/// Runs `$body` with `$g` bound to the world's export interface in `$exports`, an
/// `$Exports` of [`versioned_guest_world!`], whatever its version; the conversions in
/// `guest_types` make the same body type-check for each.
macro_rules! on_guest {
    ($Exports:ident($exports:expr), |$g:ident| $body:expr) => {
        match $exports {
            $Exports::V0_1(e) => {
                let $g = e.guest();
                $body
            }
            $Exports::V0_2(e) => {
                let $g = e.guest();
                $body
            }
        }
    };
}
pub(crate) use on_guest;

/// The export indices of a 0.2.0-or-later world, looked up once per component: the world's
/// own export and the optional 0.3.0 ones, absent from a component built before them.
pub trait WorldIndices: Clone + Send + Sync + 'static {
    /// One instance's exports.
    type Exports;
    /// Looks the exports up in `pre`.
    fn new(pre: &InstancePre<HostState>) -> Result<Self>;
    /// The exports of `instance`.
    fn load(&self, store: &mut Store<HostState>, instance: &Instance) -> Result<Self::Exports>;
}

/// A pre-instantiated component of a 0.2.0-or-later world, with its export indices.
#[derive(Clone)]
pub struct IndexedPre<I> {
    pre: InstancePre<HostState>,
    indices: I,
}

impl<I: WorldIndices> IndexedPre<I> {
    /// Wraps a component's `InstancePre`, looking its exports up.
    pub fn new(pre: InstancePre<HostState>) -> Result<Self> {
        Ok(Self {
            indices: I::new(&pre)?,
            pre,
        })
    }

    /// The engine it was compiled for.
    pub fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// A new instance in `store`.
    pub async fn instantiate_async(&self, store: &mut Store<HostState>) -> Result<I::Exports> {
        let instance = self.pre.instantiate_async(&mut *store).await?;
        self.indices.load(store, &instance)
    }
}

/// Declares a world's two faces over every served contract version — `$Pre`, the
/// pre-instantiated component, and `$Exports`, one instance's exports, each an enum with
/// one variant per export shape (0.1.0's, and 0.2.0's, which 0.3.0 exports as it is) — and
/// implements [`GuestWorld`] for them, so the provider and resource worlds share one
/// definition of what differs only in names. Each variant's exports give the world's
/// export interface as `guest()`, for [`on_guest!`].
macro_rules! versioned_guest_world {
    (
        $what:literal,
        $Pre:ident, $Exports:ident,
        V0_1: $Pre01:ty, $Ex01:ty;
        V0_2: $Pre02:ty, $Ex02:ty;
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
                $crate::runtime::guest_types::Answer<()>,
            > {
                Box::pin(async move {
                    $crate::runtime::instance_pool::on_guest!($Exports(exports), |g| {
                        $crate::runtime::guest_types::answer(g.call_warmup(store, config).await)
                    })
                })
            }

            fn shutdown<'a>(
                exports: &'a $Exports,
                store: &'a mut wasmtime::Store<$crate::runtime::host_state::HostState>,
            ) -> $crate::runtime::instance_pool::BoxFuture<'a, wasmtime::Result<()>> {
                Box::pin(async move {
                    $crate::runtime::instance_pool::on_guest!($Exports(exports), |g| {
                        g.call_shutdown(store).await
                    })
                })
            }
        }
    };
}
pub(crate) use versioned_guest_world;

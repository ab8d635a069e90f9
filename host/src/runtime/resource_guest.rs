//! The `resource-backend` world of every served contract version behind one typed face:
//! the host calls `describe`, `warmup`, `shutdown`, `initialize`, `cleanup`, `discover`
//! and `call` without knowing which version the component was built against.

use crate::runtime::bindings::{v0_1, v0_2};
use crate::runtime::guest_types::{
    GuestError, RawBackendInfo, RawDiscovery, RawToolOutput, SessionView,
};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{BoxFuture, GuestWorld};
use anyhow::Result;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

/// A pre-instantiated resource backend.
#[derive(Clone)]
pub enum ResourcePre {
    /// Built against 0.1.0.
    V0_1(v0_1::backend::ResourceBackendPre<HostState>),
    /// Built against 0.2.0 or 0.3.0 (whose `backend` export is 0.2.0's).
    V0_2(v0_2::backend::ResourceBackendPre<HostState>),
}

/// One instance's exports.
pub enum ResourceExports {
    /// Built against 0.1.0.
    V0_1(v0_1::backend::ResourceBackend),
    /// Built against 0.2.0.
    V0_2(v0_2::backend::ResourceBackend),
}

/// Runs `$body` with `$g` bound to the instance's `backend` export, whatever its version;
/// the conversions in `guest_types` make the same body type-check for each.
macro_rules! on_guest {
    ($exports:expr, |$g:ident| $body:expr) => {
        match $exports {
            ResourceExports::V0_1(b) => {
                let $g = b.wharf_plugin0_1_0_backend();
                $body
            }
            ResourceExports::V0_2(b) => {
                let $g = b.wharf_plugin0_2_0_backend();
                $body
            }
        }
    };
}

impl ResourcePre {
    /// Wraps an `InstancePre` of a component built against `version`.
    pub fn new(
        version: crate::runtime::world::ContractVersion,
        pre: InstancePre<HostState>,
    ) -> Result<Self> {
        use crate::runtime::world::ContractVersion as V;
        Ok(match version {
            V::V0_1 => Self::V0_1(v0_1::backend::ResourceBackendPre::new(pre)?),
            // 0.3.0 exports 0.2.0's `backend` as it is.
            V::V0_2 | V::V0_3 => Self::V0_2(v0_2::backend::ResourceBackendPre::new(pre)?),
        })
    }
}

impl GuestWorld for ResourcePre {
    type Exports = ResourceExports;

    fn engine(&self) -> &Engine {
        match self {
            Self::V0_1(p) => p.engine(),
            Self::V0_2(p) => p.engine(),
        }
    }

    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, Result<ResourceExports>> {
        Box::pin(async move {
            Ok(match self {
                Self::V0_1(p) => ResourceExports::V0_1(p.instantiate_async(store).await?),
                Self::V0_2(p) => ResourceExports::V0_2(p.instantiate_async(store).await?),
            })
        })
    }

    fn warmup<'a>(
        exports: &'a ResourceExports,
        store: &'a mut Store<HostState>,
        config: &'a str,
    ) -> BoxFuture<'a, wasmtime::Result<Result<(), GuestError>>> {
        Box::pin(async move {
            on_guest!(exports, |g| Ok(g
                .call_warmup(&mut *store, config)
                .await?
                .map_err(Into::into)))
        })
    }

    fn shutdown<'a>(
        exports: &'a ResourceExports,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<()>> {
        Box::pin(async move { on_guest!(exports, |g| g.call_shutdown(&mut *store).await) })
    }
}

impl ResourceExports {
    /// `describe`.
    pub async fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<RawBackendInfo> {
        on_guest!(self, |g| Ok(g.call_describe(&mut *store).await?.into()))
    }

    /// `initialize`: the session data, JSON text.
    pub async fn initialize(
        &self,
        store: &mut Store<HostState>,
        session_id: &str,
        key: &str,
        config: &str,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        on_guest!(self, |g| Ok(g
            .call_initialize(&mut *store, session_id, key, config)
            .await?
            .map_err(Into::into)))
    }

    /// `cleanup`.
    pub async fn cleanup(
        &self,
        store: &mut Store<HostState>,
        session: &SessionView,
    ) -> wasmtime::Result<Result<(), GuestError>> {
        on_guest!(self, |g| Ok(g
            .call_cleanup(&mut *store, &session.into())
            .await?
            .map_err(Into::into)))
    }

    /// `discover`.
    pub async fn discover(
        &self,
        store: &mut Store<HostState>,
        session: &SessionView,
    ) -> wasmtime::Result<Result<RawDiscovery, GuestError>> {
        on_guest!(self, |g| Ok(g
            .call_discover(&mut *store, &session.into())
            .await?
            .map(Into::into)
            .map_err(Into::into)))
    }

    /// `call`.
    pub async fn call(
        &self,
        store: &mut Store<HostState>,
        tool: &str,
        args: &str,
        session: Option<&SessionView>,
    ) -> wasmtime::Result<Result<RawToolOutput, GuestError>> {
        on_guest!(self, |g| {
            let session = session.map(Into::into);
            Ok(g.call_call(&mut *store, tool, args, session.as_ref())
                .await?
                .map(Into::into)
                .map_err(Into::into))
        })
    }
}

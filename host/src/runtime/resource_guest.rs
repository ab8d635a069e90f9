//! The `resource-backend` world of every served contract version behind one typed face:
//! the host calls `describe`, `warmup`, `shutdown`, `initialize`, `cleanup`, `discover`
//! and `call` without knowing which version the component was built against.

use crate::runtime::bindings::v0_1;
use crate::runtime::guest_types::{
    GuestError, RawBackendInfo, RawDiscovery, RawToolOutput, RawToolSpec, SessionView,
};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::versioned_guest_world;
use crate::runtime::resource_listing::{Resource02, ResourcePre02};
use wasmtime::Store;

versioned_guest_world!(
    "resource backend",
    ResourcePre, ResourceExports,
    V0_1: v0_1::backend::ResourceBackendPre<HostState>, v0_1::backend::ResourceBackend,
        wharf_plugin0_1_0_backend;
    V0_2: ResourcePre02, Resource02, wharf_plugin0_2_0_backend;
);

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

type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

impl ResourceExports {
    /// `describe`.
    pub async fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<RawBackendInfo> {
        on_guest!(self, |g| Ok(g.call_describe(&mut *store).await?.into()))
    }

    /// `tool-listing.list-tools` (0.3.0): `None` from a component built before it, or
    /// whose tools are the fixed list of `describe`.
    pub async fn list_tools(
        &self,
        store: &mut Store<HostState>,
    ) -> Answer<Option<Vec<RawToolSpec>>> {
        match self {
            ResourceExports::V0_1(_) => Ok(Ok(None)),
            ResourceExports::V0_2(b) => b.list_tools(store).await,
        }
    }

    /// `initialize`: the session data, JSON text.
    pub async fn initialize(
        &self,
        store: &mut Store<HostState>,
        session_id: &str,
        key: &str,
        config: &str,
    ) -> Answer<String> {
        on_guest!(self, |g| Ok(g
            .call_initialize(&mut *store, session_id, key, config)
            .await?
            .map_err(Into::into)))
    }

    /// `cleanup`.
    pub async fn cleanup(&self, store: &mut Store<HostState>, session: &SessionView) -> Answer<()> {
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
    ) -> Answer<RawDiscovery> {
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
    ) -> Answer<RawToolOutput> {
        on_guest!(self, |g| {
            let session = session.map(Into::into);
            Ok(g.call_call(&mut *store, tool, args, session.as_ref())
                .await?
                .map(Into::into)
                .map_err(Into::into))
        })
    }
}

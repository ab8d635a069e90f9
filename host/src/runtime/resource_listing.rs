//! A resource backend built against 0.2.0 or 0.3.0: 0.2.0's `backend` export, plus 0.3.0's
//! `tool-listing` export (its tools as they are now) when the component has it, both
//! loaded from one instance.

use crate::runtime::bindings::v0_2::backend::{ResourceBackend, ResourceBackendIndices};
use crate::runtime::bindings::v0_3::backend::exports::wharf::plugin0_3_0::tool_listing::{
    Guest as ListingGuest, GuestIndices as ListingIndices,
};
use crate::runtime::guest_types::{GuestError, RawToolSpec};
use crate::runtime::host_state::HostState;
use anyhow::Result;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

/// A pre-instantiated 0.2.0 or 0.3.0 resource backend.
#[derive(Clone)]
pub struct ResourcePre02 {
    pre: InstancePre<HostState>,
    base: ResourceBackendIndices,
    listing: Option<ListingIndices>,
}

/// One instance's exports of a 0.2.0 or 0.3.0 resource backend.
pub struct Resource02 {
    base: ResourceBackend,
    listing: Option<ListingGuest>,
}

impl ResourcePre02 {
    /// Wraps a component's `InstancePre`; `tool-listing` is looked up, and absent before
    /// 0.3.0.
    pub fn new(pre: InstancePre<HostState>) -> Result<Self> {
        Ok(Self {
            base: ResourceBackendIndices::new(&pre)?,
            listing: ListingIndices::new(&pre).ok(),
            pre,
        })
    }

    /// The engine it was compiled for.
    pub fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// A new instance in `store`.
    pub async fn instantiate_async(&self, store: &mut Store<HostState>) -> Result<Resource02> {
        let instance = self.pre.instantiate_async(&mut *store).await?;
        let base = self.base.load(&mut *store, &instance)?;
        let listing = match &self.listing {
            Some(indices) => Some(indices.load(&mut *store, &instance)?),
            None => None,
        };
        Ok(Resource02 { base, listing })
    }
}

impl Resource02 {
    /// The 0.2.0 `backend` export.
    pub fn wharf_plugin0_2_0_backend(
        &self,
    ) -> &crate::runtime::bindings::v0_2::backend::exports::wharf::plugin0_2_0::backend::Guest {
        self.base.wharf_plugin0_2_0_backend()
    }

    /// `tool-listing.list-tools`; `None` from a component without the export.
    pub async fn list_tools(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Result<Option<Vec<RawToolSpec>>, GuestError>> {
        let Some(listing) = &self.listing else {
            return Ok(Ok(None));
        };
        Ok(listing
            .call_list_tools(&mut *store)
            .await?
            .map(|listed| listed.map(|tools| tools.into_iter().map(Into::into).collect()))
            .map_err(Into::into))
    }
}

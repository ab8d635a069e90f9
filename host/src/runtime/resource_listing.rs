//! A resource backend built against 0.2.0 or 0.3.0: 0.2.0's `backend` export, plus 0.3.0's
//! `tool-listing` export (its tools as they are now) when the component has it, both
//! loaded from one instance.

use crate::runtime::bindings::v0_2::backend::exports::wharf::plugin0_2_0::backend::Guest;
use crate::runtime::bindings::v0_2::backend::{ResourceBackend, ResourceBackendIndices};
use crate::runtime::bindings::v0_3::backend::exports::wharf::plugin0_3_0::tool_listing::{
    Guest as ListingGuest, GuestIndices as ListingIndices,
};
use crate::runtime::guest_types::{Answer, RawToolSpec};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{IndexedPre, WorldIndices};
use anyhow::Result;
use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

/// A pre-instantiated 0.2.0 or 0.3.0 resource backend.
pub type ResourcePre02 = IndexedPre<ResourceIndices02>;

/// Where a 0.2.0 or 0.3.0 resource backend's exports are; `tool-listing` is absent before
/// 0.3.0.
#[derive(Clone)]
pub struct ResourceIndices02 {
    base: ResourceBackendIndices,
    listing: Option<ListingIndices>,
}

/// One instance's exports of a 0.2.0 or 0.3.0 resource backend.
pub struct Resource02 {
    base: ResourceBackend,
    listing: Option<ListingGuest>,
}

impl WorldIndices for ResourceIndices02 {
    type Exports = Resource02;

    fn new(pre: &InstancePre<HostState>) -> Result<Self> {
        Ok(Self {
            base: ResourceBackendIndices::new(pre)?,
            listing: ListingIndices::new(pre).ok(),
        })
    }

    fn load(&self, store: &mut Store<HostState>, instance: &Instance) -> Result<Resource02> {
        Ok(Resource02 {
            base: self.base.load(&mut *store, instance)?,
            listing: self
                .listing
                .as_ref()
                .map(|indices| indices.load(&mut *store, instance))
                .transpose()?,
        })
    }
}

impl Resource02 {
    /// The 0.2.0 `backend` export.
    pub fn guest(&self) -> &Guest {
        self.base.wharf_plugin0_2_0_backend()
    }

    /// `tool-listing.list-tools`; `None` from a component without the export.
    pub async fn list_tools(
        &self,
        store: &mut Store<HostState>,
    ) -> Answer<Option<Vec<RawToolSpec>>> {
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

//! The `resource-backend` world of every served contract version behind one typed face:
//! what the host asks of a component outside a pooled call (`describe`, `tool-listing`),
//! whatever version it was built against; `ResourceComponent` makes the pooled calls
//! through [`on_guest!`](crate::runtime::instance_pool::on_guest).

use crate::runtime::bindings::v0_1;
use crate::runtime::guest_types::{Answer, RawBackendInfo, RawToolSpec};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{on_guest, versioned_guest_world};
use crate::runtime::resource_listing::{Resource02, ResourcePre02};
use wasmtime::Store;

versioned_guest_world!(
    "resource backend",
    ResourcePre, ResourceExports,
    V0_1: v0_1::backend::ResourceBackendPre<HostState>, v0_1::backend::ResourceBackend;
    V0_2: ResourcePre02, Resource02;
);

impl v0_1::backend::ResourceBackend {
    /// The 0.1.0 `backend` export.
    pub fn guest(&self) -> &v0_1::backend::exports::wharf::plugin0_1_0::backend::Guest {
        self.wharf_plugin0_1_0_backend()
    }
}

impl ResourceExports {
    /// `describe`.
    pub async fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<RawBackendInfo> {
        on_guest!(ResourceExports(self), |g| Ok(g
            .call_describe(store)
            .await?
            .into()))
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
}

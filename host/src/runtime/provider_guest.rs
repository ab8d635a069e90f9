//! The `sandbox-provider` world of every served contract version behind one typed face:
//! `describe`, whatever version the component was built against, and the exports
//! `ProviderComponent` calls through [`on_guest!`](crate::runtime::instance_pool::on_guest)
//! (`create`, `run-command`, `destroy`, `is-alive`, the native file operations) or, from
//! 0.3.0, `processes` and `suspension`.

use crate::runtime::bindings::v0_1;
use crate::runtime::guest_types::RawProviderInfo;
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{on_guest, versioned_guest_world};
use crate::runtime::provider_processes::{Provider02, ProviderPre02};
use wasmtime::Store;

versioned_guest_world!(
    "sandbox provider",
    ProviderPre, ProviderExports,
    V0_1: v0_1::provider::SandboxProviderPre<HostState>, v0_1::provider::SandboxProvider;
    V0_2: ProviderPre02, Provider02;
);

impl v0_1::provider::SandboxProvider {
    /// The 0.1.0 `provider` export.
    pub fn guest(&self) -> &v0_1::provider::exports::wharf::plugin0_1_0::provider::Guest {
        self.wharf_plugin0_1_0_provider()
    }
}

impl ProviderExports {
    /// The exports of a provider built against 0.2.0 or later; `None` for 0.1.0.
    pub fn v0_2(&self) -> Option<&Provider02> {
        match self {
            ProviderExports::V0_1(_) => None,
            ProviderExports::V0_2(p) => Some(p),
        }
    }

    /// `describe`, with the features 0.3.0's `processes` and `suspension` exports report.
    pub async fn describe(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<RawProviderInfo> {
        let mut info: RawProviderInfo = on_guest!(ProviderExports(self), |g| {
            RawProviderInfo::from(g.call_describe(&mut *store).await?)
        });
        if let Some(g) = self.v0_2().and_then(Provider02::processes) {
            info.features.processes = g.call_available(&mut *store).await?;
        }
        if let Some(g) = self.v0_2().and_then(Provider02::suspension) {
            info.features.suspension = g.call_available(&mut *store).await?;
        }
        Ok(info)
    }
}

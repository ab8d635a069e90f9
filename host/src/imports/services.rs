//! The process-wide services the host imports use: the engines (containers, the key-value
//! store), the metrics recorder, quotas and the shared budgets. Made once by the front door
//! (the composition root, which connects the engines); every instance's store holds them.

use std::sync::Arc;

/// Process-wide services the host imports use. Every engine is there: a host without
/// Docker or a store holds the disabled engine, which answers 5012.
#[derive(Debug)]
pub struct HostServices {
    /// The container engine (`container`, `exec`).
    pub containers: Arc<dyn crate::engines::ContainerEngine>,
    /// Where container creates take their backend's turn (`container`).
    pub create_turns: Arc<crate::imports::container_turns::CreateTurns>,
    /// The key-value store (`kv`).
    pub kv: Arc<dyn crate::engines::KvStore>,
    /// Where host imports record their calls.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The cap on what a guest has the host buffer for it (exec output, copy-out).
    pub guest_buffer_cap: crate::bounded::GuestBufferCap,
    /// Per-tenant quotas (pool shares, container counts).
    pub quotas: Arc<crate::quotas::Quotas>,
    /// Each backend's cap on outbound requests in flight (`http`).
    pub egress_budgets: crate::imports::http::EgressBudgets,
    /// The scopes whose quota check and write are under way on this node (`kv`).
    pub kv_writes: Arc<crate::engines::kv::ScopeWrites>,
}

impl Default for HostServices {
    /// No engines (each answers 5012), no quotas: what `describe` runs with.
    fn default() -> Self {
        Self {
            containers: Arc::new(crate::engines::DisabledEngine),
            create_turns: Default::default(),
            kv: Arc::new(crate::engines::DisabledKvStore),
            metrics: Default::default(),
            guest_buffer_cap: Default::default(),
            quotas: Default::default(),
            egress_budgets: Default::default(),
            kv_writes: Default::default(),
        }
    }
}

impl HostServices {
    /// The container engine when the host has one (the sweeps and the reaper skip the
    /// containers otherwise).
    pub fn container_engine(&self) -> Option<&dyn crate::engines::ContainerEngine> {
        self.containers
            .configured()
            .is_ok()
            .then_some(&*self.containers)
    }
}

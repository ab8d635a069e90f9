//! What `GET /metrics` shows at scrape time: the front door reads the instance pools, the
//! session store and Docker into a [`Scrape`] and the recorder (`metrics`) encodes it.

use super::Wharf;
use crate::metrics::{PoolCounts, Scrape};
use crate::runtime::world::ContractVersion;

impl Wharf {
    /// The metrics in OpenMetrics text, scrape-time gauges read now.
    pub async fn render_metrics(&self) -> Result<String, std::fmt::Error> {
        let backends = self.registry.backends();
        let contracts = ContractVersion::SUPPORTED
            .into_iter()
            .map(|version| {
                let loaded = backends
                    .iter()
                    .filter(|b| b.description.contract == version)
                    .count();
                (version.as_str().to_string(), loaded)
            })
            .collect();
        let pools = backends
            .iter()
            .map(|b| {
                let pool = b.behaviour().pool().status();
                let counts = PoolCounts {
                    idle: pool.idle,
                    busy: pool.busy,
                    discarded: pool.discarded,
                    retired: pool.retired,
                };
                (b.name.to_string(), counts)
            })
            .collect();
        let records = self
            .sessions
            .store()
            .list_sessions(None, None, None)
            .await
            .ok();
        let tenant_of: std::collections::HashMap<&str, &str> = records
            .iter()
            .flatten()
            .map(|r| (r.id.as_str(), r.tenant.as_str()))
            .collect();
        let tenant_sessions = records
            .as_ref()
            .map(|records| records.iter().map(|r| r.tenant.clone()).collect());
        let sessions = records.as_ref().map(|records| {
            records
                .iter()
                .map(|r| (r.backend.clone(), r.state.as_str()))
                .collect()
        });
        let listed = match self.services.container_engine() {
            Some(engine) => engine.list_all().await.ok(),
            None => None,
        };
        let tenant_containers = listed.as_ref().map(|list| {
            list.iter()
                .filter_map(|c| c.session.as_deref().and_then(|s| tenant_of.get(s)))
                .map(|t| t.to_string())
                .collect()
        });
        let containers = listed.map(|list| list.into_iter().map(|c| c.backend).collect());
        let tenant_snapshots = self.sessions.store().snapshot_usage(None).await.ok();
        let tenant_volumes = self.volume_usage().await.ok();
        self.metrics.render(Scrape {
            contracts,
            pools,
            sessions,
            containers,
            tenant_sessions,
            tenant_containers,
            tenant_snapshots,
            tenant_volumes,
        })
    }
}

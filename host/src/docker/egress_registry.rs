//! The egress state of one engine client: which containers are linked (their waiting
//! tasks), each session's byte budget, and the proxy's resolver. See `egress_links`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bollard::models::ContainerInspectResponse;
use tokio::task::AbortHandle;

use super::labels::LABEL_EGRESS;
use crate::egress_proxy::{Meter, Resolver};
use crate::policy::EgressRule;

/// Sessions whose budgets are remembered at most (each is held while a container of the
/// session is linked; past it, forgotten ones are dropped first).
const MAX_METERS: usize = 4096;

/// The egress links of one engine client: container id → its waiting task, and each
/// session's byte budget.
#[derive(Debug, Default)]
pub(crate) struct EgressLinks {
    pub(super) links: Mutex<HashMap<String, AbortHandle>>,
    meters: Mutex<HashMap<String, Weak<Meter>>>,
    resolver: OnceLock<Arc<Resolver>>,
}

impl EgressLinks {
    /// The proxy's resolver, once set.
    pub(super) fn resolver(&self) -> &OnceLock<Arc<Resolver>> {
        &self.resolver
    }

    pub(super) fn meter_of(&self, key: &str, limit: u64) -> Arc<Meter> {
        let Ok(mut meters) = self.meters.lock() else {
            return Arc::new(Meter::new(limit));
        };
        if let Some(meter) = meters.get(key).and_then(Weak::upgrade) {
            return meter;
        }
        if meters.len() >= MAX_METERS {
            meters.retain(|_, meter| meter.strong_count() > 0);
        }
        let meter = Arc::new(Meter::new(limit));
        if meters.len() < MAX_METERS {
            meters.insert(key.to_string(), Arc::downgrade(&meter));
        }
        meter
    }
}

/// The rule a container's `wharf.egress` label carries, if it has one.
pub(crate) fn rule_of(found: &ContainerInspectResponse) -> Option<EgressRule> {
    rule_in(
        found
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|labels| labels.get(LABEL_EGRESS))
            .map(String::as_str),
    )
}

/// The rule a `wharf.egress` label's value carries.
pub(crate) fn rule_in(label: Option<&str>) -> Option<EgressRule> {
    match serde_json::from_str(label?) {
        Ok(rule) => Some(rule),
        Err(e) => {
            tracing::warn!("a container's wharf.egress label does not parse: {e}");
            None
        }
    }
}

//! Egress by name for this engine's containers: a container created with an egress rule
//! has no network, and its agent listens on the sandbox's loopback (`--egress-port`). The
//! host keeps one request waiting at that agent (`EgressWait`); each connection a program
//! makes arrives over it, and the host serves it with [`crate::egress_proxy`] and waits
//! again. The rule rides in the container's `wharf.egress` label (the host writes it; a
//! guest cannot), so a restarted host links its containers again with the same rule.
//!
//! Nothing is created outside the container (no network, no firewall rule, no socket on
//! the host's disk), so a crashed host leaves nothing to sweep: removing the container
//! removes its egress.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wharf_sandbox_protocol::ErrorKind;

use super::agent_client::{AgentEndpoint, await_egress};
use super::agent_stream::AgentFailure;
use super::client::Docker;
use super::egress_registry::rule_in;
use super::labels::{
    LABEL_BACKEND, LABEL_EGRESS, LABEL_NODE, LABEL_SESSION, engine_filter, shorten,
};
use super::types::{ContainerState, Owner};
use crate::egress_proxy::{EgressSession, Resolver};
use crate::policy::EgressRule;

/// How long an agent may stay unreachable before its container counts as gone.
const GONE_AFTER: Duration = Duration::from_secs(30);
/// The longest pause between attempts to reach an agent.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl Docker {
    /// Names the egress proxy resolves to fixed addresses instead of asking the host's
    /// resolver (`[server] egress_resolve`); the addresses are still checked. Set once.
    pub fn resolve_egress_names(&self, fixed: &BTreeMap<String, Vec<IpAddr>>) {
        let _ = self.egress().resolver().set(Arc::new(Resolver::new(fixed)));
    }

    fn resolver(&self) -> Arc<Resolver> {
        self.egress()
            .resolver()
            .get_or_init(|| Arc::new(Resolver::default()))
            .clone()
    }

    /// Starts serving the egress of an owned, running container under its `rule` (a
    /// container already linked keeps its link).
    pub(crate) async fn link_egress(&self, owner: &Owner, id: &str, rule: EgressRule) {
        let endpoint = match self.agent_of(owner, id).await {
            Ok(Some(endpoint)) => endpoint,
            Ok(None) => {
                tracing::warn!(container = %shorten(id), "a sandbox with an egress rule has no reachable agent: it has no egress");
                return;
            }
            Err(e) => {
                tracing::warn!(container = %shorten(id), "cannot link a sandbox's egress: {e}");
                return;
            }
        };
        let links = self.egress();
        let Ok(mut linked) = links.links.lock() else {
            return;
        };
        linked.retain(|_, task| !task.is_finished());
        if linked.contains_key(id) {
            return;
        }
        let budget_key = owner.session.clone().unwrap_or_else(|| id.to_string());
        let session = Arc::new(EgressSession {
            meter: links.meter_of(&budget_key, rule.max_bytes),
            backend: owner.backend.clone(),
            session: owner.session.clone().unwrap_or_else(|| "-".to_string()),
            container: shorten(id),
            resolver: self.resolver(),
            rule,
        });
        let task = tokio::spawn(keep_waiting(endpoint, session, id.to_string()));
        linked.insert(id.to_string(), task.abort_handle());
    }

    /// Stops serving a container's egress (it is being removed).
    pub(crate) fn unlink_egress(&self, id: &str) {
        if let Ok(mut linked) = self.egress().links.lock()
            && let Some(task) = linked.remove(id)
        {
            task.abort();
        }
    }

    /// Links every running container of this node that has an egress rule: after a
    /// restart, their agents wait for a host again.
    pub async fn relink_egress(&self) {
        let filters = engine_filter(
            "label",
            vec![
                LABEL_EGRESS.to_string(),
                format!("{LABEL_NODE}={}", self.node_id()),
            ],
        );
        let found = match self.list_filtered(filters).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("cannot list the sandboxes whose egress to link again: {e}");
                return;
            }
        };
        for container in found {
            let owner = Owner {
                backend: container
                    .label(LABEL_BACKEND)
                    .unwrap_or_default()
                    .to_string(),
                session: container.label(LABEL_SESSION).map(str::to_string),
            };
            if container.state == ContainerState::Running
                && let Some(rule) = rule_in(container.label(LABEL_EGRESS))
            {
                self.link_egress(&owner, &container.id, rule).await;
            }
        }
    }
}

/// Keeps one request waiting at the agent; each connection it hands over is served as a
/// proxy connection, at most `max_connections` at once (more wait in the agent's backlog).
/// Ends when the agent has been unreachable for [`GONE_AFTER`] or refuses for good.
async fn keep_waiting(endpoint: AgentEndpoint, session: Arc<EgressSession>, id: String) {
    let places = Arc::new(Semaphore::new(session.rule.max_connections as usize));
    let mut backoff = Duration::from_millis(20);
    let mut failing_since: Option<Instant> = None;
    // Until an agent that predates hand-overs (one an earlier host started) refuses them.
    let mut hand_over = true;
    loop {
        let Ok(place) = places.clone().acquire_owned().await else {
            return;
        };
        match await_egress(&endpoint, hand_over).await {
            Ok(stream) => {
                failing_since = None;
                backoff = Duration::from_millis(20);
                let session = session.clone();
                tokio::spawn(async move {
                    crate::egress_proxy::serve(stream, session).await;
                    drop(place);
                });
            }
            Err(AgentFailure::Impostor(pid)) => {
                tracing::warn!(container = %shorten(&id), "the egress of a sandbox stops: its agent's socket is held by pid {pid:?}");
                return;
            }
            Err(AgentFailure::Refused(e)) if hand_over && e.kind == ErrorKind::Invalid => {
                tracing::debug!(container = %shorten(&id), "the sandbox's agent relays egress (no hand-over): {}", e.message);
                hand_over = false;
            }
            Err(AgentFailure::Refused(e)) if e.kind == ErrorKind::NotFound => {
                tracing::warn!(container = %shorten(&id), "the sandbox's agent has no egress listener: {}", e.message);
                return;
            }
            Err(failure) => {
                drop(place);
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > GONE_AFTER {
                    tracing::debug!(container = %shorten(&id), "the egress of a sandbox ends: {failure}");
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

//! The sandbox agents of the containers a Docker client has talked to: container id →
//! (owning backend, agent endpoint), both fixed for a container's life, so a command in a
//! known container needs no engine call. Bounded; a miss costs one inspect.

use std::collections::HashMap;
use std::sync::Mutex;

use super::agent_client::AgentEndpoint;

/// Containers remembered at most; past it the memory starts over.
const MAX_REMEMBERED: usize = 4096;

/// The agents of the containers this client has talked to: id → (backend, endpoint).
#[derive(Debug, Default)]
pub(crate) struct KnownAgents {
    by_id: Mutex<HashMap<String, (String, AgentEndpoint)>>,
}

impl KnownAgents {
    /// The endpoint of container `id` if it is remembered as `backend`'s.
    pub(crate) fn get(&self, id: &str, backend: &str) -> Option<AgentEndpoint> {
        let known = self.by_id.lock().ok()?;
        match known.get(id) {
            Some((owner, endpoint)) if owner == backend => Some(endpoint.clone()),
            _ => None,
        }
    }

    /// Remembers container `id` of `backend` and its agent.
    pub(crate) fn remember(&self, id: &str, backend: &str, endpoint: AgentEndpoint) {
        if let Ok(mut known) = self.by_id.lock() {
            if known.len() >= MAX_REMEMBERED {
                known.clear();
            }
            known.insert(id.to_string(), (backend.to_string(), endpoint));
        }
    }

    /// Forgets a container (removed, restarted, or its agent unreachable).
    pub(crate) fn forget(&self, id: &str) {
        if let Ok(mut known) = self.by_id.lock() {
            known.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_agents_answer_only_their_backend() {
        let known = KnownAgents::default();
        let ep = AgentEndpoint::Socket {
            socket: "/s".into(),
            peer: super::super::agent_client::ExpectedPeer::Pid(7),
        };
        known.remember("id", "b1", ep.clone());
        assert_eq!(known.get("id", "b1"), Some(ep));
        assert_eq!(known.get("id", "b2"), None);
        known.forget("id");
        assert_eq!(known.get("id", "b1"), None);
    }
}

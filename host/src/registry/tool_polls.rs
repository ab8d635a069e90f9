//! Asking backends that list their tools at run time (contract 0.3.0's `tool-listing`)
//! for them again. A guest runs only when the host calls it, so the host polls: one task
//! per registry wakes every second and starts a listing for each backend whose interval
//! (`[backends.X.tools] poll_seconds`) has passed and that is not being asked already;
//! each listing runs under the backend's call timeout, so a guest that hangs holds only its
//! own listing.

use super::BackendRegistry;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the poller looks for due listings.
const TICK: Duration = Duration::from_secs(1);

/// Starts the poller; it ends when the registry is dropped.
pub fn start_tool_polls(registry: &Arc<BackendRegistry>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak: Weak<BackendRegistry> = Arc::downgrade(registry);
    handle.spawn(async move {
        loop {
            tokio::time::sleep(TICK).await;
            let Some(registry) = weak.upgrade() else {
                return;
            };
            let now = Instant::now();
            for backend in registry.backends() {
                if !backend.poll().is_some_and(|p| p.claim(now)) {
                    continue;
                }
                let registry = registry.clone();
                tokio::spawn(async move {
                    if let Err(e) = registry.refresh_tools(&backend).await {
                        tracing::warn!(
                            backend = &*backend.name,
                            "listing its tools failed; the last list stays served: {}",
                            e.message
                        );
                    }
                    if let Some(poll) = backend.poll() {
                        poll.finish();
                    }
                });
            }
        }
    });
}

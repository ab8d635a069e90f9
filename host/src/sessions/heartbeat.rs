//! This node's lease in the store (`store/node_rows`): renewed every third of the lease, so
//! other nodes take over its rows only once it is gone.

use super::{SessionManager, now_ms};
use std::sync::Arc;

impl SessionManager {
    /// Renews this node's lease now and every third of the lease, for as long as the
    /// manager lives (the task holds it only while a renewal runs).
    pub fn start_heartbeat(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let period = self.lease / 3;
        handle.spawn(async move {
            loop {
                let Some(sessions) = weak.upgrade() else {
                    return;
                };
                sessions.heartbeat().await;
                drop(sessions);
                tokio::time::sleep(period).await;
            }
        });
    }

    async fn heartbeat(&self) {
        let now = now_ms();
        let until = (now + self.lease.as_millis() as u64) as i64;
        if let Err(e) = self.store.heartbeat(&self.node, until, now as i64).await {
            tracing::warn!("node heartbeat failed: {}", e.message);
        }
    }
}

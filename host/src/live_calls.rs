//! The live view of tool calls (the console's Calls page): each finished call, as its audit
//! line shows it (never its arguments), to whoever watches right now. A broadcast of at
//! most [`LIVE_CALLS_BUFFERED`] calls: a watcher that falls behind skips what it missed
//! and is told how many; with no watcher a call costs one atomic read.

use std::sync::Arc;
use tokio::sync::broadcast;

/// Calls kept for watchers that have not read them yet (shared by all watchers).
pub const LIVE_CALLS_BUFFERED: usize = 256;
/// Watchers at once on one host; the next is refused until one leaves.
pub const MAX_LIVE_WATCHERS: usize = 32;

/// One finished call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LiveCall {
    /// When it ended, ms since the Unix epoch.
    pub at_ms: u64,
    /// The tenant that called (`(every tenant)` for an admin token).
    pub tenant: String,
    /// The tool, or `-` when none was resolved.
    pub tool: String,
    /// The backend, or `-`.
    pub backend: String,
    /// The session, or `-`.
    pub session: String,
    /// The code it answered (0: success).
    pub code: u32,
    /// How long it took, ms.
    pub duration_ms: u64,
    /// The quota that refused it, or `-`.
    pub refused: String,
}

/// Where calls are published and watched.
#[derive(Debug)]
pub struct LiveCalls {
    sender: broadcast::Sender<Arc<LiveCall>>,
    watchers: Arc<tokio::sync::Semaphore>,
}

impl Default for LiveCalls {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(LIVE_CALLS_BUFFERED).0,
            watchers: Arc::new(tokio::sync::Semaphore::new(MAX_LIVE_WATCHERS)),
        }
    }
}

/// One watcher's place: its receiver, and its slot (freed when dropped).
#[derive(Debug)]
pub struct LiveWatch {
    /// The calls, as they end.
    pub calls: broadcast::Receiver<Arc<LiveCall>>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl LiveCalls {
    /// Publishes the call `make` describes, made only when someone watches.
    pub fn publish(&self, make: impl FnOnce() -> LiveCall) {
        if self.sender.receiver_count() > 0 {
            // No receiver left between the check and the send is not an error.
            let _ = self.sender.send(Arc::new(make()));
        }
    }

    /// A new watcher, or `None` when [`MAX_LIVE_WATCHERS`] already watch.
    pub fn watch(&self) -> Option<LiveWatch> {
        let slot = self.watchers.clone().try_acquire_owned().ok()?;
        Some(LiveWatch {
            calls: self.sender.subscribe(),
            _slot: slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u64) -> LiveCall {
        LiveCall {
            at_ms: n,
            tenant: "t".into(),
            tool: "echo:say".into(),
            backend: "echo".into(),
            session: "-".into(),
            code: 0,
            duration_ms: 1,
            refused: "-".into(),
        }
    }

    #[tokio::test]
    async fn nothing_is_made_without_a_watcher_and_a_slow_one_skips() {
        let live = LiveCalls::default();
        live.publish(|| panic!("made with nobody watching"));
        let mut watch = live.watch().expect("a slot");
        for n in 0..(LIVE_CALLS_BUFFERED as u64 + 10) {
            live.publish(|| call(n));
        }
        match watch.calls.recv().await {
            Err(broadcast::error::RecvError::Lagged(missed)) => assert_eq!(missed, 10),
            other => panic!("{other:?}"),
        }
        assert_eq!(watch.calls.recv().await.expect("a call").at_ms, 10);
    }

    #[test]
    fn watchers_are_capped() {
        let live = LiveCalls::default();
        let held: Vec<_> = (0..MAX_LIVE_WATCHERS).map(|_| live.watch()).collect();
        assert!(held.iter().all(Option::is_some));
        assert!(live.watch().is_none());
        drop(held);
        assert!(live.watch().is_some());
    }
}

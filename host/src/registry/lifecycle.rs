//! What the registry remembers about hot loads besides the loaded backends: the last
//! refusal per name, upgrades waiting for approval, and names that were unloaded (their
//! tools answer 5011). Why an upgrade ended a session is the sessions' (`sessions/ended`).

use super::BackendRegistry;
pub use crate::backend_status::{PendingUpgrade, Rejection};
use crate::clock::now_ms;
use crate::config::BackendConfig;
use crate::error_code::WharfError;
use crate::runtime::loaded_backend::LoadedBackend;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// What a deployment did.
#[derive(Debug, Clone)]
pub enum Deployed {
    /// The new version serves.
    Active(Arc<LoadedBackend>),
    /// The new version waits for approval; the running one keeps serving.
    Pending(Box<PendingUpgrade>),
}

pub(super) struct Pending {
    pub(super) loaded: Arc<LoadedBackend>,
    pub(super) config: BackendConfig,
    pub(super) view: PendingUpgrade,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) errors: BTreeMap<String, Rejection>,
    pub(super) pending: BTreeMap<String, Pending>,
    pub(super) unloaded: BTreeSet<String>,
}

/// Hot-load bookkeeping: one deployment at a time, refusals, pending upgrades, names that
/// were unloaded.
#[derive(Default)]
pub(super) struct Lifecycle {
    pub(super) deploys: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

impl Lifecycle {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Option<T> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }
}

impl BackendRegistry {
    /// Records why a component for `name` was refused (shown in `/v1/backends` until a
    /// load of `name` succeeds); the running version, if any, keeps serving.
    pub fn record_rejection(&self, name: &str, sha256: String, reason: String) {
        tracing::warn!(backend = name, %sha256, "component refused: {reason}");
        self.parts
            .metrics
            .record_event(name, crate::metrics::BackendEvent::Reject);
        let rejection = Rejection {
            reason,
            sha256,
            at_ms: now_ms(),
        };
        self.lifecycle
            .with(|s| s.errors.insert(name.to_string(), rejection));
    }

    /// The last refusal of `name` (cleared by a successful load) and its pending upgrade.
    pub fn backend_status(&self, name: &str) -> (Option<Rejection>, Option<PendingUpgrade>) {
        self.lifecycle
            .with(|s| {
                (
                    s.errors.get(name).cloned(),
                    s.pending.get(name).map(|p| p.view.clone()),
                )
            })
            .unwrap_or_default()
    }

    /// Refusals of names that are not loaded (never were, or were unloaded since).
    pub fn rejected_backends(&self) -> Vec<(String, Rejection)> {
        let loaded: BTreeSet<String> = self.backends().iter().map(|b| b.name.to_string()).collect();
        self.lifecycle
            .with(|s| {
                s.errors
                    .iter()
                    .filter(|(name, _)| !loaded.contains(*name))
                    .map(|(name, r)| (name.clone(), r.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The backend a request names: loaded, or 5011 when the name was loaded or
    /// configured once (unloaded, or failed to load), or 4002 when this host never heard
    /// of it (a typo is the caller's fault, not worth a retry).
    pub fn requested_backend(&self, name: &str) -> Result<Arc<LoadedBackend>, WharfError> {
        let unavailable = match self.backend(name) {
            Ok(backend) => return Ok(backend),
            Err(e) => e,
        };
        let known = self
            .lifecycle
            .with(|s| s.unloaded.contains(name) || s.errors.contains_key(name))
            .unwrap_or(true);
        if known {
            return Err(unavailable);
        }
        Err(WharfError::invalid_request(format!(
            "unknown backend `{name}`; GET /v1/backends lists them"
        )))
    }

    /// The unloaded backend a requested tool name points at, if any.
    pub(super) fn unloaded_backend_in(&self, requested: &str) -> Option<String> {
        self.lifecycle
            .with(|s| {
                s.unloaded
                    .iter()
                    .filter(|name| {
                        requested.strip_prefix(name.as_str()).is_some_and(|rest| {
                            rest.len() > 1
                                && matches!(rest.as_bytes()[0], b':' | b'.' | b'_' | b'-')
                        })
                    })
                    .max_by_key(|name| name.len())
                    .cloned()
            })
            .flatten()
    }

    /// Drains the upgrades waiting for approval (at shutdown).
    pub(super) async fn drain_pending(&self) {
        let pending = self
            .lifecycle
            .with(|s| std::mem::take(&mut s.pending))
            .unwrap_or_default();
        for (_, p) in pending {
            p.loaded.drain().await;
        }
    }
}

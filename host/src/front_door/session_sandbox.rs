//! Where a session's sandbox runs, for the routes that reach into it directly (previews,
//! terminals): its containers' label and the running container, remembered per session so
//! a request costs no engine call.

use super::Wharf;
use crate::engines::{ContainerState, Owner};
use crate::error_code::{Code, WharfError};
use crate::session_record::SessionRecord;

/// Sandbox containers found so far: session id → (its containers' label, the container).
/// Bounded; a stale entry fails its use and is looked up again.
#[derive(Debug, Default)]
pub(super) struct SandboxTargets {
    by_session: std::sync::Mutex<std::collections::HashMap<String, (String, String)>>,
}

/// Sessions whose container is remembered at most (then forgotten all at once).
const MAX_SANDBOX_TARGETS: usize = 4096;

impl SandboxTargets {
    fn get(&self, session: &str, label: &str) -> Option<String> {
        let known = self.by_session.lock().ok()?;
        known
            .get(session)
            .filter(|(l, _)| l == label)
            .map(|(_, container)| container.clone())
    }

    fn remember(&self, session: &str, label: &str, container: &str) {
        if let Ok(mut known) = self.by_session.lock() {
            if known.len() >= MAX_SANDBOX_TARGETS {
                known.clear();
            }
            known.insert(
                session.to_string(),
                (label.to_string(), container.to_string()),
            );
        }
    }

    /// Forgets a session's container (gone, or replaced).
    pub(super) fn forget(&self, session: &str) {
        if let Ok(mut known) = self.by_session.lock() {
            known.remove(session);
        }
    }
}

/// How a route may use what [`Wharf::running_sandbox`] remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    /// The remembered container, if any.
    Remembered,
    /// Ask the engine (the remembered one just failed).
    Fresh,
}

impl Wharf {
    /// The label a session's containers carry: its id, or the warm pool's id its sandbox
    /// kept.
    pub(super) fn sandbox_label(record: &SessionRecord) -> String {
        record.data["warm"]
            .as_str()
            .unwrap_or(&record.id)
            .to_string()
    }

    /// A session's running sandbox container and the owner to reach it as. A paused or
    /// archived session is refused (4090: it answers nothing until resumed); one with no running
    /// container gets 4002 naming `what` the caller wanted of it.
    pub(super) async fn running_sandbox(
        &self,
        record: &SessionRecord,
        lookup: Lookup,
        what: &str,
    ) -> Result<(Owner, String), WharfError> {
        let session_id = &record.id;
        record.refuse_if_suspended(format_args!("resume it to open its {what}"))?;
        let label = Self::sandbox_label(record);
        let owner = Owner {
            backend: record.backend.clone(),
            session: Some(label.clone()),
        };
        if lookup == Lookup::Remembered
            && let Some(container) = self.sandbox_targets.get(session_id, &label)
        {
            return Ok((owner, container));
        }
        let containers = self
            .services
            .containers
            .list_owned(&record.backend, Some(&label))
            .await?;
        let Some(container) = containers
            .iter()
            .find(|c| c.state == ContainerState::Running)
        else {
            self.sandbox_targets.forget(session_id);
            return Err(WharfError::new(
                Code::InvalidRequest,
                format!("session {session_id} has no running sandbox to open its {what}"),
            ));
        };
        self.sandbox_targets
            .remember(session_id, &label, &container.id);
        Ok((owner, container.id.clone()))
    }
}

//! A session made for one call (`WhenMissing::Temporary`): released by
//! [`TemporarySession::destroy`] after the call, or in the background if the call is
//! dropped first (the client went away mid-call).

use super::Wharf;
use crate::error_code::WharfError;
use crate::tenant::Tenant;
use std::sync::{Arc, Weak};

/// A session that lives for one call.
pub(super) struct TemporarySession {
    wharf: Weak<Wharf>,
    tenant: Tenant,
    id: String,
    armed: bool,
}

impl TemporarySession {
    /// The session's id.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// Releases the session now.
    pub(super) async fn destroy(mut self) {
        self.armed = false;
        if let Some(wharf) = self.wharf.upgrade() {
            release(wharf, &self.tenant, &self.id).await;
        }
    }
}

async fn release(wharf: Arc<Wharf>, tenant: &Tenant, id: &str) {
    if let Err(e) = wharf.delete_session(tenant, id).await {
        tracing::warn!(session = %id, "destroying a temporary session failed: {}", e.message);
    }
}

impl Drop for TemporarySession {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (Some(wharf), Ok(handle)) =
            (self.wharf.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (tenant, id) = (self.tenant.clone(), std::mem::take(&mut self.id));
        handle.spawn(async move { release(wharf, &tenant, &id).await });
    }
}

impl Wharf {
    /// Creates a session of `backend` for `tenant` for one call, under a key of its own
    /// (`{key}#temp-…`), so concurrent temporary sessions of one caller never share.
    pub(super) async fn temporary_session(
        &self,
        tenant: &str,
        backend: &str,
        key: &str,
    ) -> Result<TemporarySession, WharfError> {
        let key = format!("{key}#temp-{}", uuid::Uuid::new_v4().simple());
        let (record, _) = self.acquire_keyed(tenant, backend, &key).await?;
        tracing::debug!(session = %record.id, %key, backend, "temporary session for one call");
        Ok(TemporarySession {
            wharf: self.myself.clone(),
            tenant: Tenant::own(tenant),
            id: record.id,
            armed: true,
        })
    }
}

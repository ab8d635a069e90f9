//! The tenant's container quota, checked inside the backend's create turn: the containers
//! labelled with the tenant's sessions (of this backend, or of every backend when the
//! quota is the tenant's own), counted on the container engine against the sessions in the
//! shared ledger (`engines::CreateLedger`). The tenant is the one whose request the call serves (the call's context).

use super::guest_error;
use crate::error_code::Code;
use crate::quotas::Scope;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;

impl super::container::ContainerView<'_> {
    /// 4030 naming the quota when the calling tenant's containers are at it (`&mut`: the
    /// state is not `Sync`, and the future must be `Send`).
    pub(super) async fn check_container_quota(
        &mut self,
        engine: &dyn crate::engines::ContainerEngine,
    ) -> Result<(), Error> {
        let tenant = self.call.tenant.clone();
        let limits = self
            .ctx
            .quotas
            .limits(&tenant, Some(self.counter.backend()));
        let Some((limit, scope)) = limits.containers else {
            return Ok(());
        };
        let Some(ledger) = self.ctx.create_turns.ledger() else {
            return Ok(());
        };
        let backend = (scope == Scope::Backend).then_some(self.counter.backend());
        let in_use = running_containers(engine, ledger, &tenant, backend, None)
            .await
            .map_err(super::wharf_error)?;
        if in_use < limit {
            return Ok(());
        }
        self.ctx
            .metrics
            .tenants
            .record_refusal(&tenant, "containers");
        tracing::info!(target: "wharf::audit", event = "quota_refused", tenant = %tenant, backend = %self.counter.backend(), quota = "containers", code = 4030);
        let mut e = guest_error(
            Code::Forbidden,
            format!(
                "tenant `{tenant}` is at its quota of {limit} containers; release a session first"
            ),
        );
        e.data = Some(
            serde_json::json!({
                "quota": "containers",
                "limit": limit,
                "in_use": in_use,
                "tenant": &*tenant,
            })
            .to_string(),
        );
        Err(e)
    }
}

/// The running containers of `tenant`'s sessions (of `backend` only, when given), `except`
/// one session's: what the tenant's `containers` quota counts. A paused container is not
/// running: paused sessions are counted by their own cap (`max_paused`,
/// `paused_sessions`), and a resume is checked against this count.
pub(crate) async fn running_containers(
    engine: &dyn crate::engines::ContainerEngine,
    ledger: &dyn crate::engines::CreateLedger,
    tenant: &str,
    backend: Option<&str>,
    except: Option<&str>,
) -> Result<u64, crate::error_code::WharfError> {
    let sessions = ledger.tenant_sessions(tenant, backend).await?;
    Ok(engine
        .list_all()
        .await?
        .iter()
        .filter(|c| backend.is_none_or(|b| c.backend == b))
        .filter(|c| c.state != crate::engines::ContainerState::Paused)
        .filter(|c| {
            c.session
                .as_ref()
                .is_some_and(|s| sessions.contains(s) && Some(s.as_str()) != except)
        })
        .count() as u64)
}

//! `GET /v1/quotas`: the caller's limits and use (per backend too); an admin sees every
//! tenant's.

use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::route_answer::answer;
use crate::config::TokenScope;
use crate::front_door::Wharf;
use axum::extract::State;
use std::sync::Arc;

/// `GET /v1/quotas`.
pub async fn serve(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    answer(
        &caller,
        TokenScope::Read,
        wharf.quota_report(caller.session_tenant(), &caller.tenant),
    )
    .await
}

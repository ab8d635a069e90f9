//! `GET /v1/quotas`: the caller's limits and use (per backend too); an admin sees every
//! tenant's.

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, RequestClock};
use crate::config::TokenScope;
use crate::front_door::Wharf;
use axum::extract::State;
use std::sync::Arc;

/// `GET /v1/quotas`.
pub async fn serve(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    let t = RequestClock::start();
    if let Err(e) = caller.require(TokenScope::Read) {
        return t.reply(Err(e));
    }
    t.reply(
        wharf
            .quota_report(caller.session_tenant(), &caller.tenant)
            .await,
    )
}

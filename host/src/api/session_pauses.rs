//! `POST /v1/sessions/{id}/pause` and `/resume`: a session's sandbox frozen (memory and
//! processes kept, no CPU) and thawed. Both are idempotent and answer the session; a
//! resume says in `data.resumed` whether the session was paused.

use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::route_answer::answer_on_session;
use crate::api::session_reply::SessionReply;
use crate::config::TokenScope;
use crate::front_door::Wharf;
use axum::extract::{Path, State};
use std::sync::Arc;

/// `POST /v1/sessions/{id}/pause`.
pub async fn pause(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Envelope {
    answer_on_session(&wharf, &caller, TokenScope::Call, &id, async {
        let record = wharf.pause_session(caller.session_tenant(), &id).await?;
        Ok(SessionReply::from(&record))
    })
    .await
}

/// `POST /v1/sessions/{id}/resume`.
pub async fn resume(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Envelope {
    answer_on_session(&wharf, &caller, TokenScope::Call, &id, async {
        let (record, resumed) = wharf.resume_session(caller.session_tenant(), &id).await?;
        Ok(SessionReply {
            resumed: Some(resumed),
            ..SessionReply::from(&record)
        })
    })
    .await
}

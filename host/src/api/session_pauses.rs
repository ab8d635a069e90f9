//! `POST /v1/sessions/{id}/pause` and `/resume`: a session's sandbox frozen (memory and
//! processes kept, no CPU) and thawed. Both are idempotent and answer the session; a
//! resume says in `data.resumed` whether the session was paused.

use crate::api::envelope::Envelope;
use crate::api::route_answer::PathRoute;
use crate::api::session_reply::SessionReply;
use crate::config::TokenScope;

/// `POST /v1/sessions/{id}/pause`.
pub async fn pause(r: PathRoute) -> Envelope {
    r.answer_on_session(TokenScope::Call, async {
        let record = r.wharf.pause_session(r.session_tenant(), &r.id).await?;
        Ok(SessionReply::from(&record))
    })
    .await
}

/// `POST /v1/sessions/{id}/resume`.
pub async fn resume(r: PathRoute) -> Envelope {
    r.answer_on_session(TokenScope::Call, async {
        let (record, resumed) = r.wharf.resume_session(r.session_tenant(), &r.id).await?;
        Ok(SessionReply {
            resumed: Some(resumed),
            ..SessionReply::from(&record)
        })
    })
    .await
}

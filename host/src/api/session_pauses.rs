//! `POST /v1/sessions/{id}/pause` and `/resume`: a session's sandbox frozen (memory and
//! processes kept, no CPU) and thawed. Both are idempotent and answer the session; a
//! resume says in `data.resumed` whether the session was paused.

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, RequestClock};
use crate::api::session_access::permitted_session;
use crate::api::session_reply::SessionReply;
use crate::config::TokenScope;
use crate::front_door::Wharf;
use axum::extract::{Path, State};
use serde_json::Value;
use std::sync::Arc;

/// `POST /v1/sessions/{id}/pause`.
pub async fn pause(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Envelope {
    let t = RequestClock::start();
    t.reply(
        async {
            caller.require(TokenScope::Call)?;
            permitted_session(&wharf, &caller, &id).await?;
            let record = wharf.pause_session(caller.session_tenant(), &id).await?;
            Ok(reply(&record, None))
        }
        .await,
    )
}

/// `POST /v1/sessions/{id}/resume`.
pub async fn resume(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Envelope {
    let t = RequestClock::start();
    t.reply(
        async {
            caller.require(TokenScope::Call)?;
            permitted_session(&wharf, &caller, &id).await?;
            let (record, resumed) = wharf.resume_session(caller.session_tenant(), &id).await?;
            Ok(reply(&record, Some(resumed)))
        }
        .await,
    )
}

fn reply(record: &crate::session_record::SessionRecord, resumed: Option<bool>) -> Value {
    let mut reply = SessionReply::from(record);
    reply.resumed = resumed;
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

//! Snapshots over REST: `POST /v1/sessions/{id}/snapshots {name?}` commits a session's
//! sandbox filesystem to an image; `GET /v1/snapshots`, `GET|DELETE /v1/snapshots/{id}`;
//! `POST /v1/sessions {backend, from_snapshot}` starts a session from one (the session
//! routes); `POST /v1/sessions/{id}/fork {count, keys?, config?}` makes `count` sessions
//! from a snapshot of one. A snapshot is its tenant's: another tenant gets 4007.

use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::json_body::EmptyBody;
use crate::api::route_answer::{PathRoute, answer};
use crate::api::session_reply::SessionReply;
use crate::config::TokenScope;
use crate::front_door::Wharf;
use crate::snapshot_record::SnapshotRecord;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// The body of `POST /v1/sessions/{id}/snapshots` (may be empty).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// A name for it (at most 128 bytes of printable text); `snapshot of <session>` when
    /// absent.
    #[serde(default)]
    pub name: Option<String>,
}

/// The body of `POST /v1/sessions/{id}/fork`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// How many sessions to make (1 to 32).
    pub count: u32,
    /// Their keys (`count` different ones); random when absent.
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    /// The session config each new session gets (isolation, user, network...); by default
    /// the one the origin session was created with.
    #[serde(default)]
    pub config: Option<Value>,
}

/// What a fork made.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ForkReply {
    /// The snapshot the sessions start from (kept: delete it once they are done).
    pub snapshot: SnapshotRecord,
    /// The new sessions, in the order of `keys`.
    pub sessions: Vec<SessionReply>,
}

/// The caller's snapshots.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SnapshotList {
    /// Oldest first.
    pub snapshots: Vec<SnapshotRecord>,
}

/// `POST /v1/sessions/{id}/snapshots`.
pub async fn create(r: PathRoute, body: Result<Bytes, BytesRejection>) -> Envelope {
    r.answer(TokenScope::Call, async {
        let request: SnapshotRequest = r.session_body(body, EmptyBody::EmptyObject).await?;
        r.wharf
            .snapshot_session(r.session_tenant(), &r.id, request.name)
            .await
    })
    .await
}

/// `GET /v1/snapshots`.
pub async fn list(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    answer(&caller, TokenScope::Read, async {
        let snapshots = wharf.snapshots(caller.session_tenant()).await?;
        Ok(SnapshotList { snapshots })
    })
    .await
}

/// `GET /v1/snapshots/{id}`.
pub async fn get(r: PathRoute) -> Envelope {
    r.answer(
        TokenScope::Read,
        r.wharf.snapshot(r.session_tenant(), &r.id),
    )
    .await
}

/// `DELETE /v1/snapshots/{id}`.
pub async fn delete(r: PathRoute) -> Envelope {
    r.answer(TokenScope::Call, async {
        r.wharf.delete_snapshot(r.session_tenant(), &r.id).await?;
        Ok(serde_json::json!({ "deleted": r.id }))
    })
    .await
}

/// `POST /v1/sessions/{id}/fork`.
pub async fn fork(r: PathRoute, body: Result<Bytes, BytesRejection>) -> Envelope {
    r.answer(TokenScope::Call, async {
        let request: ForkRequest = r.session_body(body, EmptyBody::Refused).await?;
        let (snapshot, sessions) = r
            .wharf
            .fork_session(
                &r.caller.tenant,
                r.session_tenant(),
                &r.id,
                request.count,
                request.keys,
                request.config,
            )
            .await?;
        Ok(ForkReply {
            snapshot,
            sessions: sessions.iter().map(SessionReply::from).collect(),
        })
    })
    .await
}

//! Named volumes over REST: `POST /v1/volumes {name, shared?}`, `GET /v1/volumes`,
//! `GET|DELETE /v1/volumes/{volume}` (an id, or a name of the caller's own tenant). A
//! volume is its tenant's: another tenant gets 4007. Sessions mount them through their
//! session config (`volumes: [{name, path, read_only}]`).

use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::api::json_body::{self, EmptyBody};
use crate::api::route_answer::{PathRoute, answer};
use crate::config::TokenScope;
use crate::front_door::Wharf;
use crate::volume_record::VolumeRecord;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The body of `POST /v1/volumes`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeRequest {
    /// Its name, unique within the caller's tenant: 1 to 64 ASCII letters, digits, `-`,
    /// `_` or `.`, starting with a letter or digit.
    pub name: String,
    /// Whether sandboxes of several sessions may mount it at once (default: one at a
    /// time).
    #[serde(default)]
    pub shared: bool,
}

/// The caller's volumes.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct VolumeList {
    /// Oldest first.
    pub volumes: Vec<VolumeRecord>,
}

/// `POST /v1/volumes`.
pub async fn create(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Envelope {
    answer(&caller, TokenScope::Call, async {
        let request: VolumeRequest = json_body::parse_body(body, EmptyBody::Refused)?;
        wharf
            .create_volume(&caller.tenant, &request.name, request.shared)
            .await
    })
    .await
}

/// `GET /v1/volumes`.
pub async fn list(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    answer(&caller, TokenScope::Read, async {
        let volumes = wharf.volumes(caller.session_tenant()).await?;
        Ok(VolumeList { volumes })
    })
    .await
}

/// `GET /v1/volumes/{volume}`.
pub async fn get(r: PathRoute) -> Envelope {
    r.answer(
        TokenScope::Read,
        r.wharf.volume(r.session_tenant(), &r.caller.tenant, &r.id),
    )
    .await
}

/// `DELETE /v1/volumes/{volume}`.
pub async fn delete(r: PathRoute) -> Envelope {
    r.answer(TokenScope::Call, async {
        let gone = r
            .wharf
            .delete_volume(r.session_tenant(), &r.caller.tenant, &r.id)
            .await?;
        Ok(serde_json::json!({ "deleted": gone.id }))
    })
    .await
}

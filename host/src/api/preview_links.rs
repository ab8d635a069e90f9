//! `POST /v1/sessions/{id}/previews` mints a signed URL for a port the session exposes;
//! `DELETE` revokes every URL signed for the session so far (its preview epoch moves on).
//! The URL is served by the preview listener (`api/preview`), never on this origin.

use crate::api::envelope::Envelope;
use crate::api::json_body::EmptyBody;
use crate::api::route_answer::PathRoute;
use crate::config::TokenScope;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::{Deserialize, Serialize};

/// Which port, for how long.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(example = serde_json::json!({"port": 8080, "ttl_seconds": 600}))]
pub struct PreviewRequest {
    /// A port in the session's `expose_ports`.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// How long the URL works, s (default 3600, at most 604800).
    #[serde(default)]
    #[schemars(range(min = 1, max = 604800))]
    pub ttl_seconds: Option<u64>,
}

/// A signed preview URL.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PreviewReply {
    /// Open it in a browser: it needs no token.
    pub url: String,
    /// When it stops working, Unix seconds.
    pub expires_at: u64,
}

/// The session's preview epoch after a revocation.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PreviewsRevoked {
    /// URLs signed before this epoch no longer work.
    pub epoch: u64,
}

/// `POST /v1/sessions/{id}/previews`.
pub async fn create(r: PathRoute, body: Result<Bytes, BytesRejection>) -> Envelope {
    r.answer(TokenScope::Call, async {
        let request: PreviewRequest = r.session_body(body, EmptyBody::Refused).await?;
        let link = r
            .wharf
            .preview_url(r.session_tenant(), &r.id, request.port, request.ttl_seconds)
            .await?;
        Ok(PreviewReply {
            url: link.url,
            expires_at: link.expires_at_s,
        })
    })
    .await
}

/// `DELETE /v1/sessions/{id}/previews`.
pub async fn revoke(r: PathRoute) -> Envelope {
    r.answer_on_session(TokenScope::Call, async {
        let epoch = r.wharf.revoke_previews(r.session_tenant(), &r.id).await?;
        Ok(PreviewsRevoked { epoch })
    })
    .await
}

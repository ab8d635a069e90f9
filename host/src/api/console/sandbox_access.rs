//! Who may open a session's sandbox from the console (the Files and Processes pages):
//! viewers whose token may call and whose allowlist names the session's backend, as on the
//! REST routes; the query naming the session (the Terminal page's too); the refusal page.

use super::pages::failure;
use super::{Console, Viewer};
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// `?id=` of a session's page.
#[derive(Deserialize)]
pub struct SessionQuery {
    #[serde(default)]
    pub(super) id: String,
}

/// A page's query that names a session.
pub(super) trait NamesSession {
    /// The session's id.
    fn session_id(&self) -> &str;
}

impl NamesSession for SessionQuery {
    fn session_id(&self) -> &str {
        &self.id
    }
}

/// A sandbox page's request (files, processes): its query (refused as [`Query`] refuses),
/// then the viewer, when it may open the sandbox of the session the query names.
pub(super) struct SandboxPage<Q> {
    pub(super) viewer: Viewer,
    pub(super) query: Q,
}

impl<Q: DeserializeOwned + NamesSession + Send + Sync> FromRequestParts<Arc<Console>>
    for SandboxPage<Q>
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Response> {
        let Query(query) = Query::<Q>::from_request_parts(parts, console)
            .await
            .map_err(IntoResponse::into_response)?;
        let viewer = console.page_viewer(&parts.headers).await?;
        let allowed = async {
            viewer.caller.require(TokenScope::Call)?;
            permitted_session(&console.wharf, &viewer.caller, query.session_id()).await
        }
        .await;
        match allowed {
            Ok(_) => Ok(Self { viewer, query }),
            Err(e) => Err(failed(&e)),
        }
    }
}

/// A front-door error as a page.
pub(super) fn failed(e: &WharfError) -> Response {
    failure("Sandbox unavailable", e)
}

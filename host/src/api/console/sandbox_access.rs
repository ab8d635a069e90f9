//! Who may open a session's sandbox from the console (the Files and Processes pages):
//! viewers whose token may call and whose allowlist names the session's backend, as on the
//! REST routes; the query naming the session (the Terminal page's too); the refusal page.

use super::pages::failure;
use super::{Console, Viewer};
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

/// `?id=` of a session's page.
#[derive(Deserialize)]
pub struct SessionQuery {
    #[serde(default)]
    pub(super) id: String,
}

/// The viewer, when it may open this session's sandbox (files, processes).
pub(super) async fn sandbox_viewer(
    console: &Console,
    headers: &HeaderMap,
    id: &str,
) -> Result<Viewer, Response> {
    let viewer = console.page_viewer(headers).await?;
    let allowed = async {
        viewer.caller.require(TokenScope::Call)?;
        permitted_session(&console.wharf, &viewer.caller, id).await
    }
    .await;
    match allowed {
        Ok(_) => Ok(viewer),
        Err(e) => Err(failed(&e)),
    }
}

/// A front-door error as a page.
pub(super) fn failed(e: &WharfError) -> Response {
    failure("Sandbox unavailable", e)
}

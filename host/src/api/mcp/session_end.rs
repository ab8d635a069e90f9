//! Ending an MCP session (`DELETE /mcp`): the answer the SDKs accept, and what an explicit
//! end releases.
//!
//! rmcp answers a successful `DELETE` 202, which the official clients log as a failed
//! termination (they accept 200 or 204): it is answered 204. The Wharf sessions a client
//! got without naming a key were keyed by its MCP session id (`call::session_key`); when
//! the MCP session's own token ends it explicitly they are released too, in a task of their
//! own (a client that hangs up right after its `DELETE` does not cancel the release). Those
//! keyed by `X-Wharf-Session-Key` or `_meta["wharf/session_key"]` belong to the agent and
//! are kept. An MCP session that ends otherwise (idle timeout, or evicted past the session
//! cap) releases nothing: its Wharf sessions keep their own idle TTL, so one client's flood
//! never ends another's sandbox.

use super::call::MCP_SESSION_HEADER;
use crate::api::auth::Caller;
use crate::front_door::Wharf;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;
use std::sync::Arc;

/// Passes the `DELETE` on to the transport; once it has ended the session, `ended` is told
/// (it drops the session's direct calls) and the session's unkeyed Wharf sessions are
/// released.
pub async fn end(
    wharf: &Arc<Wharf>,
    ended: impl FnOnce(&str),
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let caller = request.extensions().get::<Caller>().cloned();
    let mut response = next.run(request).await;
    let Some(id) = session.filter(|_| response.status().is_success()) else {
        return response;
    };
    ended(&id);
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
    }
    if let Some(caller) = caller {
        let wharf = wharf.clone();
        tokio::spawn(async move { release_keyed_by(&wharf, &caller, &id).await });
    }
    response
}

/// Releases the caller's own Wharf sessions whose key is the MCP session id `id`.
async fn release_keyed_by(wharf: &Wharf, caller: &Caller, id: &str) {
    let tenant = caller.own_tenant();
    let sessions = match wharf.sessions(&tenant, None, Some(id)).await {
        Ok(sessions) => sessions,
        Err(e) => {
            tracing::warn!(error = %e.message, "could not list the sessions of an ended MCP session");
            return;
        }
    };
    for session in sessions {
        match wharf.delete_session(&tenant, &session.id).await {
            Ok(_) => {
                tracing::info!(session = %session.id, backend = %session.backend, "released with its MCP session")
            }
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e.message, "could not release a session of an ended MCP session")
            }
        }
    }
}

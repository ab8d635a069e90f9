//! MCP sessions belong to the token that opened them: the `Mcp-Session-Id` the transport
//! hands out at `initialize` is bound to the caller's token, and a request that presents it
//! with another token (or presents an id this host never handed out) answers 4007, as if
//! the session did not exist.

use super::call::MCP_SESSION_HEADER;
use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::error_code::WharfError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Which token opened each live MCP session.
pub struct McpOwners {
    owners: Mutex<HashMap<String, String>>,
    sessions: Arc<LocalSessionManager>,
}

impl McpOwners {
    /// Owners of the sessions of `sessions` (the transport's session manager).
    pub fn new(sessions: Arc<LocalSessionManager>) -> Self {
        Self {
            owners: Mutex::new(HashMap::new()),
            sessions,
        }
    }

    fn owner(&self, id: &str) -> Option<String> {
        self.owners
            .lock()
            .ok()
            .and_then(|owners| owners.get(id).cloned())
    }

    /// Binds `id` to `token`, forgetting the sessions the transport has ended meanwhile.
    async fn bind(&self, id: String, token: String) {
        let live: HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        if let Ok(mut owners) = self.owners.lock() {
            owners.retain(|session, _| live.contains(session));
            owners.insert(id, token);
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(id);
        }
    }
}

/// Middleware in front of the MCP transport, after authentication (it reads the
/// [`Caller`] the auth middleware stored).
pub async fn guard(State(owners): State<Arc<McpOwners>>, request: Request, next: Next) -> Response {
    use axum::http::Method;
    // The transport answers other methods 405 itself, whatever session id they carry.
    if !matches!(
        *request.method(),
        Method::GET | Method::POST | Method::DELETE
    ) {
        return next.run(request).await;
    }
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        let e = WharfError::internal("the MCP route ran without authentication");
        return Envelope::refusal(e);
    };
    let presented = request
        .headers()
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &presented
        && owners.owner(id).as_deref() != Some(caller.name.as_str())
    {
        tracing::warn!(token = %caller.name, "refused an MCP session id this token did not open");
        let e = WharfError::session_not_found(format!(
            "MCP session `{}` not found: initialize a session of your own",
            id.escape_debug()
        ));
        return Envelope::refusal(e);
    }
    let deleting = request.method() == axum::http::Method::DELETE;
    let response = next.run(request).await;
    match presented {
        None => {
            let opened = response
                .headers()
                .get(MCP_SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Some(id) = opened {
                owners.bind(id, caller.name.clone()).await;
            }
        }
        Some(id) => {
            let ended = response.status() == axum::http::StatusCode::NOT_FOUND
                || (deleting && response.status().is_success());
            if ended {
                owners.forget(&id);
            }
        }
    }
    response
}

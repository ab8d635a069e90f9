//! MCP sessions belong to the token that opened them: the `Mcp-Session-Id` the transport
//! hands out at `initialize` is bound to the caller's token, and a request that presents it
//! with another token (or presents an id this host never handed out) answers 4007, as if
//! the session did not exist.
//!
//! The table is also where MCP sessions are capped (`[server.connections]`
//! `max_mcp_sessions` and `max_mcp_sessions_per_token`): a session past a cap ends the
//! oldest idle session of the same token (or, past the host's cap, of anyone) before it is
//! bound, so a flood of `initialize` requests holds at most the caps' worth of sessions.

use super::call::MCP_SESSION_HEADER;
use crate::api::auth::Caller;
use crate::api::envelope::Envelope;
use crate::config::ConnectionLimits;
use crate::error_code::WharfError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Who opened a live MCP session, and when it last saw a request.
struct Owned {
    token: String,
    last_seen: Instant,
}

/// Which token opened each live MCP session.
pub struct McpOwners {
    owners: Mutex<HashMap<String, Owned>>,
    sessions: Arc<LocalSessionManager>,
    max_total: usize,
    max_per_token: usize,
}

impl McpOwners {
    /// Owners of the sessions of `sessions` (the transport's session manager), capped by
    /// `limits`.
    pub fn new(sessions: Arc<LocalSessionManager>, limits: &ConnectionLimits) -> Self {
        Self {
            owners: Mutex::new(HashMap::new()),
            sessions,
            max_total: limits.max_mcp_sessions.max(1),
            max_per_token: limits.max_mcp_sessions_per_token.max(1),
        }
    }

    /// The owner of `id`, marking the session as just used.
    fn touch(&self, id: &str) -> Option<String> {
        let mut owners = self.owners.lock().ok()?;
        let owned = owners.get_mut(id)?;
        owned.last_seen = Instant::now();
        Some(owned.token.clone())
    }

    /// Live sessions bound now (for tests and the ledger's measurements).
    pub fn len(&self) -> usize {
        self.owners.lock().map_or(0, |owners| owners.len())
    }

    /// Whether no session is bound.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Binds `id` to `token`, first ending the oldest idle sessions that the caps say
    /// must make room.
    async fn bind(&self, id: String, token: String) {
        let evicted = {
            let Ok(mut owners) = self.owners.lock() else {
                return;
            };
            let mut evicted = Vec::new();
            let of_token = owners.values().filter(|o| o.token == token).count();
            if of_token >= self.max_per_token
                && let Some(oldest) = oldest(&owners, Some(&token))
            {
                owners.remove(&oldest);
                evicted.push(oldest);
            }
            while owners.len() >= self.max_total {
                let Some(oldest) = oldest(&owners, None) else {
                    break;
                };
                owners.remove(&oldest);
                evicted.push(oldest);
            }
            owners.insert(
                id,
                Owned {
                    token: token.clone(),
                    last_seen: Instant::now(),
                },
            );
            evicted
        };
        for id in evicted {
            tracing::info!(token = %token, "ended the oldest idle MCP session to make room (server.connections caps)");
            let _ = self.sessions.close_session(&Arc::from(id.as_str())).await;
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(id);
        }
    }
}

/// The session (of `token`, or of anyone) that has gone longest without a request.
fn oldest(owners: &HashMap<String, Owned>, token: Option<&str>) -> Option<String> {
    owners
        .iter()
        .filter(|(_, o)| token.is_none_or(|t| o.token == t))
        .min_by_key(|(_, o)| o.last_seen)
        .map(|(id, _)| id.clone())
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
        && owners.touch(id).as_deref() != Some(caller.name.as_str())
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

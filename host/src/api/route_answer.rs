//! The answer of a REST route that runs no tool: the caller's scope checked first, then
//! the route's work, timed, its reply as the envelope's `data`. Session routes also check
//! the session is the caller's before the work runs. A route on one named thing starts
//! from a [`PathRoute`].

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, RequestClock};
use crate::api::json_body::{EmptyBody, parse_body};
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use crate::front_door::Wharf;
use crate::session_record::SessionRecord;
use crate::tenant::Tenant;

/// What a route on one named thing starts from (`/v1/sessions/{id}/…`, `/v1/snapshots/{id}`,
/// `/v1/volumes/{volume}`, `/v1/admin/backends/{name}`): the front door, the caller (refused
/// as [`Caller`] refuses), then the path's one parameter (refused as [`Path`] refuses).
pub struct PathRoute {
    /// The front door.
    pub wharf: Arc<Wharf>,
    /// Who is calling.
    pub caller: Caller,
    /// The path's parameter: a session or snapshot id, a volume, a backend's name.
    pub id: String,
}

impl FromRequestParts<Arc<Wharf>> for PathRoute {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, wharf: &Arc<Wharf>) -> Result<Self, Response> {
        let caller = Caller::from_request_parts(parts, wharf)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path(id) = Path::<String>::from_request_parts(parts, wharf)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            wharf: Arc::clone(wharf),
            caller,
            id,
        })
    }
}

impl PathRoute {
    /// The tenants the caller looks sessions, snapshots and volumes up under.
    pub fn session_tenant(&self) -> &Tenant {
        self.caller.session_tenant()
    }

    /// [`answer`] for this caller.
    pub async fn answer<T: Serialize>(
        &self,
        scope: TokenScope,
        work: impl Future<Output = Result<T, WharfError>>,
    ) -> Envelope {
        answer(&self.caller, scope, work).await
    }

    /// The path's session, if it is the caller's and the token's allowlist lets it use the
    /// session's backend ([`permitted_session`]).
    pub async fn permitted_session(&self) -> Result<SessionRecord, WharfError> {
        permitted_session(&self.wharf, &self.caller, &self.id).await
    }

    /// Checks `scope`, then that the path's session is the caller's and its backend on the
    /// token's allowlist ([`permitted_session`]), then runs `work`.
    pub async fn answer_on_session<T: Serialize>(
        &self,
        scope: TokenScope,
        work: impl Future<Output = Result<T, WharfError>>,
    ) -> Envelope {
        self.answer(scope, async {
            self.permitted_session().await?;
            work.await
        })
        .await
    }

    /// The JSON body of a request on the path's session, read before the session is looked
    /// up (a malformed body costs no store read), then the session checked as
    /// [`PathRoute::answer_on_session`] does: the step a session route with a body takes
    /// first inside [`PathRoute::answer`].
    pub async fn session_body<B: DeserializeOwned>(
        &self,
        body: Result<Bytes, BytesRejection>,
        empty: EmptyBody,
    ) -> Result<B, WharfError> {
        let request = parse_body(body, empty)?;
        self.permitted_session().await?;
        Ok(request)
    }
}

/// Checks `scope`, then runs `work` (which does nothing until awaited, so a caller without
/// the scope starts none of it).
pub async fn answer<T: Serialize>(
    caller: &Caller,
    scope: TokenScope,
    work: impl Future<Output = Result<T, WharfError>>,
) -> Envelope {
    let clock = RequestClock::start();
    let result = match caller.require(scope) {
        Ok(()) => work.await.map(as_data),
        Err(e) => Err(e),
    };
    clock.reply(result)
}

/// `{status: "ready", backends}` when at least one backend is loaded, else 5011 (the
/// readiness routes, `/readyz` and the compatibility API's `/ready`).
pub fn readiness(wharf: &Wharf) -> Result<Value, WharfError> {
    let backends = wharf.backend_count();
    if backends == 0 {
        return Err(WharfError::backend_unavailable("no backend is loaded"));
    }
    Ok(json!({ "status": "ready", "backends": backends }))
}

/// A reply as the envelope's `data`.
fn as_data(reply: impl Serialize) -> Value {
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

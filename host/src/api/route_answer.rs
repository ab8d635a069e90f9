//! The answer of a REST route that runs no tool: the caller's scope checked first, then
//! the route's work, timed, its reply as the envelope's `data`. Session routes also check
//! the session is the caller's before the work runs.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, RequestClock};
use crate::api::json_body::{EmptyBody, parse_body};
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use crate::front_door::Wharf;

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

/// Checks `scope`, then that session `id` is the caller's and its backend on the token's
/// allowlist ([`permitted_session`]), then runs `work`.
pub async fn answer_on_session<T: Serialize>(
    wharf: &Wharf,
    caller: &Caller,
    scope: TokenScope,
    id: &str,
    work: impl Future<Output = Result<T, WharfError>>,
) -> Envelope {
    answer(caller, scope, async {
        permitted_session(wharf, caller, id).await?;
        work.await
    })
    .await
}

/// The JSON body of a request on session `id`, read before the session is looked up (a
/// malformed body costs no store read), then the session checked as
/// [`answer_on_session`] does: the step a session route with a body takes first inside
/// [`answer`].
pub async fn session_body<B: DeserializeOwned>(
    wharf: &Wharf,
    caller: &Caller,
    id: &str,
    body: Result<Bytes, BytesRejection>,
    empty: EmptyBody,
) -> Result<B, WharfError> {
    let request = parse_body(body, empty)?;
    permitted_session(wharf, caller, id).await?;
    Ok(request)
}

/// A reply as the envelope's `data`.
fn as_data(reply: impl Serialize) -> Value {
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

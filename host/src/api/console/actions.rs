//! The admin's actions from the console's forms: approve or reject a pending upgrade,
//! unload a backend, upload a component, end a session. Each needs the console session's
//! CSRF token, an admin token and a backend the token's allowlist names, and goes through
//! the same front-door methods as the admin and session routes; the answer is a redirect
//! back to the page (an upload, sent by the page's script, gets a line of text).

use super::pages::{failure, refusal, status_of};
use super::{Console, Viewer, see_other};
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use crate::front_door::Deployment;
use axum::extract::{Form, FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;

/// The fields of an action's form.
#[derive(Deserialize)]
pub struct ActionForm {
    // Missing is refused as a wrong token (403), not as a malformed form.
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    id: Option<String>,
}

/// An action's form and its admin viewer (the form's CSRF token checked); refused when the
/// form is malformed or its viewer no admin.
pub struct AdminForm {
    viewer: Viewer,
    form: ActionForm,
}

impl FromRequest<Arc<Console>> for AdminForm {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Arc<Console>) -> Result<Self, Response> {
        let headers = request.headers().clone();
        let Ok(Form(form)) = Form::<ActionForm>::from_request(request, console).await else {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "Bad form",
                "The action was not sent as the console's form.",
            ));
        };
        let viewer = admin_viewer(console, &headers, &form.csrf).await?;
        Ok(Self { viewer, form })
    }
}

/// The viewer of a request carrying `csrf`, when it is an admin.
async fn admin_viewer(
    console: &Console,
    headers: &HeaderMap,
    csrf: &str,
) -> Result<Viewer, Response> {
    let viewer = console.form_viewer(headers, csrf).await?;
    if !viewer.admin() {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "Admins only",
            "This token may look but not act: it has no `admin` scope.",
        ));
    }
    Ok(viewer)
}

/// An error of the front door as a page.
fn failed(e: &WharfError) -> Response {
    failure("The action failed", e)
}

/// `POST /console/backends/{approve,reject,unload}` with `backend`.
pub async fn backend(
    State(console): State<Arc<Console>>,
    Path(action): Path<String>,
    AdminForm { viewer, form }: AdminForm,
) -> Response {
    let name = form.backend.unwrap_or_default();
    let by = &viewer.caller.name;
    if let Err(e) = viewer.caller.require_tool(&name, None) {
        return failed(&e);
    }
    let wharf = &console.wharf;
    let done = match action.as_str() {
        "approve" => wharf.approve_backend(&name).await.map(|b| {
            tracing::info!(backend = %name, version = %b.version, by = %by, "console: upgrade approved");
        }),
        "reject" => wharf.reject_upgrade(&name).await.map(|p| {
            tracing::info!(backend = %name, version = %p.version, by = %by, "console: upgrade rejected");
        }),
        "unload" => wharf.remove_backend(&name).await.map(|unloaded| {
            tracing::info!(backend = %name, unloaded, by = %by, "console: unload requested");
        }),
        other => Err(WharfError::invalid_request(format!(
            "no console action `{}`",
            other.escape_debug()
        ))),
    };
    match done {
        Ok(()) => see_other("/console"),
        Err(e) => failed(&e),
    }
}

/// `POST /console/sessions/end` with `id`: releases the session (its sandbox with it).
pub async fn end_session(
    State(console): State<Arc<Console>>,
    AdminForm { viewer, form }: AdminForm,
) -> Response {
    let id = form.id.unwrap_or_default();
    let caller = &viewer.caller;
    let ended = async {
        caller.require(TokenScope::Admin)?;
        permitted_session(&console.wharf, caller, &id).await?;
        console
            .wharf
            .delete_session(caller.session_tenant(), &id)
            .await
    }
    .await;
    match ended {
        Ok(deleted) => {
            tracing::info!(session = %id, deleted, by = %caller.name, "console: session ended");
            see_other("/console/sessions")
        }
        Err(e) => failed(&e),
    }
}

/// The header an upload carries the page's CSRF token in (the body is the component).
const CSRF_HEADER: &str = "x-wharf-csrf";

/// `?name=` of an upload.
#[derive(Deserialize)]
pub struct UploadTo {
    #[serde(default)]
    name: String,
}

/// `POST /console/backends/upload?name=` with the `.wasm` as the body (the Backends page's
/// script sends it, the CSRF token in `x-wharf-csrf`): loads or replaces backend `name`
/// as `PUT /v1/admin/backends/{name}` does. Answers a line of text.
pub async fn upload(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(to): Query<UploadTo>,
    request: Request,
) -> Response {
    let csrf = headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let viewer = match admin_viewer(&console, &headers, csrf).await {
        Ok(viewer) => viewer,
        Err(refused) => return refused,
    };
    let name = to.name;
    let done = async {
        viewer.caller.require_tool(&name, None)?;
        let wasm = crate::api::admin::read_upload(request).await?;
        tracing::info!(backend = %name, bytes = wasm.len(), by = %viewer.caller.name, "console: component uploaded");
        console.wharf.upload_backend(&name, wasm, None).await
    }
    .await;
    let (status, line) = match done {
        Ok(Deployment::Active(b)) => (
            StatusCode::OK,
            format!(
                "Backend `{name}` now serves version {} ({}).",
                b.version, b.declared_name
            ),
        ),
        Ok(Deployment::Pending(p)) => (
            StatusCode::OK,
            format!(
                "Version {} of `{name}` waits for approval: it declares or is granted more than the running version.",
                p.version
            ),
        ),
        Err(e) => (
            status_of(&e),
            format!("Refused ({}): {}", e.code.as_u32(), e.message),
        ),
    };
    (status, line).into_response()
}

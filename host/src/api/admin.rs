//! Admin routes (an `admin` token; they do not exist unless one is configured):
//!
//! - `PUT /v1/admin/backends/{name}[?sha256=HEX]` with the `.wasm` as the body (up to
//!   256 MiB): load or replace `name`, keeping its current settings (grants, limits,
//!   config). Answers the backend's description, its pending upgrade when the new version
//!   declares more than the running one, or 4000 with the reason for a bad component.
//!   The upload is kept in the data dir and loaded again at the next start.
//! - `DELETE /v1/admin/backends/{name}`: drain and unload (and forget a kept upload);
//!   calls then answer 5011.
//! - `POST /v1/admin/backends/{name}/approve`: activate the pending upgrade.
//! - `POST /v1/admin/backends/{name}/reject`: drop the pending upgrade; the running
//!   version keeps serving.
//!
//! What `/v1/backends` shows of the lifecycle (`last_error`, `pending`, `rejected`) is in
//! `api/backends`.

use crate::api::backends::backend_entry;
use crate::api::envelope::Envelope;
use crate::api::route_answer::PathRoute;
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{CallPlace, Deployment, Wharf};
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request};
use axum::routing::{post, put};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Largest component the upload route accepts.
pub const MAX_UPLOAD_BYTES: usize = 256 << 20;

/// The admin routes, or no routes at all when no admin token is configured.
pub fn router(wharf: &Wharf) -> Router<Arc<Wharf>> {
    if !wharf.server().auth.admin_enabled() {
        return Router::new();
    }
    Router::new()
        .route("/v1/admin/backends/{name}", put(upload).delete(unload))
        .route("/v1/admin/backends/{name}/approve", post(approve))
        .route("/v1/admin/backends/{name}/reject", post(reject))
        .route_layer(crate::api::json_body::require_octets())
}

/// An admin route's answer about the backend its path names: the scope checked, then
/// `action`, timed and placed at the backend.
async fn admin_action(
    route: &PathRoute,
    action: impl AsyncFnOnce() -> Result<Value, WharfError>,
) -> Envelope {
    route
        .answer(TokenScope::Admin, action())
        .await
        .at(CallPlace {
            backend: Some(route.id.clone()),
            ..CallPlace::default()
        })
}

/// `?sha256=` on an upload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadQuery {
    sha256: Option<String>,
}

fn too_large() -> WharfError {
    WharfError::new(
        Code::PayloadTooLarge,
        format!("the component is over the upload limit of {MAX_UPLOAD_BYTES} bytes"),
    )
}

/// Reads the upload, refusing more than [`MAX_UPLOAD_BYTES`] (4013).
pub(crate) async fn read_upload(request: Request) -> Result<Vec<u8>, WharfError> {
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_UPLOAD_BYTES as u64) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(request.into_body(), MAX_UPLOAD_BYTES)
        .await
        .map_err(|e| {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(err) = source {
                if err.is::<http_body_util::LengthLimitError>() {
                    return too_large();
                }
                source = err.source();
            }
            WharfError::invalid_request(format!("could not read the upload: {e}"))
        })?;
    if bytes.is_empty() {
        return Err(WharfError::new(
            Code::InvalidInput,
            "the body is empty: send the component's .wasm bytes",
        ));
    }
    Ok(bytes.to_vec())
}

async fn upload(
    r: PathRoute,
    query: Result<Query<UploadQuery>, QueryRejection>,
    request: Request,
) -> Envelope {
    let (wharf, caller, name) = (&r.wharf, &r.caller, &r.id);
    admin_action(&r, async || {
        let Query(query) = query.map_err(|e| WharfError::invalid_request(e.body_text()))?;
        let wasm = read_upload(request).await?;
        tracing::info!(backend = %name, bytes = wasm.len(), by = %caller.name, "component uploaded");
        // Kept in the data dir and loaded again at the next start.
        match wharf.upload_backend(name, wasm, query.sha256).await? {
            Deployment::Active(backend) => Ok(backend_entry(wharf, &backend)),
            Deployment::Pending(pending) => Ok(json!({
                "name": name,
                "state": "pending",
                "pending": pending,
                "message": format!("the upgrade declares more than the running version; approve it with POST /v1/admin/backends/{name}/approve"),
            })),
        }
    })
    .await
}

async fn unload(r: PathRoute) -> Envelope {
    admin_action(&r, async || {
        let unloaded = r.wharf.remove_backend(&r.id).await?;
        tracing::info!(backend = %r.id, unloaded, by = %r.caller.name, "unload requested");
        Ok(json!({ "name": r.id, "unloaded": unloaded }))
    })
    .await
}

async fn approve(r: PathRoute) -> Envelope {
    admin_action(&r, async || {
        let backend = r.wharf.approve_backend(&r.id).await?;
        tracing::info!(backend = %r.id, version = %backend.version, by = %r.caller.name, "upgrade approved");
        Ok(backend_entry(&r.wharf, &backend))
    })
    .await
}

async fn reject(r: PathRoute) -> Envelope {
    admin_action(&r, async || {
        let dropped = r.wharf.reject_upgrade(&r.id).await?;
        tracing::info!(backend = %r.id, version = %dropped.version, by = %r.caller.name, "upgrade rejected");
        Ok(json!({ "name": r.id, "rejected": dropped }))
    })
    .await
}

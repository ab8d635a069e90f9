//! `GET`/`PUT /v1/sessions/{id}/files?path=`: large files in and out of a sandbox session
//! outside tool calls, streamed in slices (download) and chunks (upload). An upload is
//! spooled to disk (capped in size and, across a tenant's uploads at once, in total, with a
//! read timeout) before the session's turn is taken, and only into a session that has a
//! sandbox; a download stops as soon as the sandbox sends other than what it announced,
//! when its client takes no slice for the read timeout, or when the session's lifetime
//! ends, and gives the session's turn back then. A directory goes each way as a tar stream
//! through the sandbox agent (`directories`).

mod directories;
mod paced;
mod spool;

pub use directories::{info, list, watch};
pub use spool::SpoolBudget;

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, Meta};
use crate::api::json_body::parse_query;
use crate::api::route_answer::PathRoute;
use crate::config::TokenScope;
use crate::error_code::WharfError;
use crate::front_door::SandboxTransfer;
use crate::front_door::Wharf;
use axum::body::Body;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

const SLICE_BYTES: u64 = SandboxTransfer::SLICE_BYTES;

/// Upload chunks are flushed to the sandbox at this size.
const UPLOAD_CHUNK: usize = 1 << 20;

/// `?path=`.
#[derive(Deserialize)]
pub struct FilePath {
    path: String,
}

fn failure(err: WharfError) -> Response {
    Envelope::error(err, Meta::default()).into_response()
}

/// Whether the caller may reach the path's session's sandbox: its `call` scope, and the
/// token's allowlist, which holds here as on `/v1/call` (moving files is using the backend).
async fn may_use_sandbox(session: &PathRoute) -> Result<(), WharfError> {
    session.caller.require(TokenScope::Call)?;
    session.permitted_session().await.map(drop)
}

async fn sandbox_for(session: &PathRoute) -> Result<SandboxTransfer, WharfError> {
    may_use_sandbox(session).await?;
    session
        .wharf
        .sandbox_transfer(session.session_tenant(), &session.id)
        .await
}

/// The `?path=` of a transfer, once the caller's `call` scope is checked.
fn transfer_path(
    caller: &Caller,
    query: Result<Query<FilePath>, QueryRejection>,
) -> Result<FilePath, WharfError> {
    caller.require(TokenScope::Call)?;
    parse_query(query)
}

/// Streams a file out of the sandbox, slice by slice.
pub async fn download(r: PathRoute, query: Result<Query<FilePath>, QueryRejection>) -> Response {
    let q = match transfer_path(&r.caller, query) {
        Ok(q) => q,
        Err(e) => return failure(e),
    };
    let held = match sandbox_for(&r).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    if let Some(found) = directories::through_agent(&r.wharf, &held, &q.path).await {
        return directories::stream_out(&r.wharf, found, held, &q.path)
            .await
            .unwrap_or_else(failure);
    }
    match stream_file(&r.wharf, held, q.path).await {
        Ok(response) => response.into_response(),
        Err(e) => failure(e),
    }
}

/// `path` out of a held sandbox as a streamed body with its `Content-Length` (the REST
/// download, and the console's): the slices are read while the client takes them, under
/// the session's turn, which `held` gives back when the stream ends, stalls or outlives
/// the session (`paced`).
pub(crate) async fn stream_file(
    wharf: &Wharf,
    held: SandboxTransfer,
    path: String,
) -> Result<axum::http::Response<Body>, WharfError> {
    let size = held.size(&path).await?;
    let slices = size.div_ceil(SLICE_BYTES);
    let stall = std::time::Duration::from_millis(wharf.server().upload_read_timeout_ms);
    let lasts = held.lifetime_left();
    let body = paced::paced_body(stall, lasts, |out| async move {
        for index in 0..slices {
            // The reported size is the sandbox's word: a slice other than the one it
            // announced ends the stream (and the session's turn) with an error.
            let expected = (size - index * SLICE_BYTES).min(SLICE_BYTES);
            let slice = match held.slice(&path, index).await {
                Ok(data) if data.len() as u64 == expected => Ok(bytes::Bytes::from(data)),
                Ok(data) => Err(std::io::Error::other(format!(
                    "slice {index} of `{path}` is {} bytes, {expected} announced: the file changed",
                    data.len()
                ))),
                Err(e) => Err(std::io::Error::other(e)),
            };
            let failed = slice.is_err();
            if !out.send(slice).await || failed {
                return;
            }
        }
    });
    Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/octet-stream")
        .header(axum::http::header::CONTENT_LENGTH, size)
        .body(body)
        .map_err(|e| WharfError::internal(e.to_string()))
}

/// Streams a request body into a file in the sandbox: the whole body is spooled first,
/// then written in chunks under the session's turn.
pub async fn upload(
    r: PathRoute,
    axum::Extension(budget): axum::Extension<Arc<SpoolBudget>>,
    query: Result<Query<FilePath>, QueryRejection>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Response {
    let q = match transfer_path(&r.caller, query) {
        Ok(q) => q,
        Err(e) => return failure(e),
    };
    let started = std::time::Instant::now();
    let server = r.wharf.server();
    let limits = spool::UploadLimits {
        max_bytes: server.max_upload_bytes,
        read_timeout: std::time::Duration::from_millis(server.upload_read_timeout_ms),
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Who may upload, into what, and whether the tenant's uploads have room for it, is
    // settled before a byte is read.
    let checked = async {
        r.caller.require(TokenScope::Call)?;
        spool::check_declared(declared, limits)?;
        r.wharf
            .sandbox_session_exists(r.session_tenant(), &r.id)
            .await?;
        budget.reserve(&r.caller.name, declared.unwrap_or(limits.max_bytes))
    };
    let _reservation = match checked.await {
        Ok(reservation) => reservation,
        Err(e) => return failure(e),
    };
    let spooled = match spool::spool(body, &server.data_dir, limits).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let held = match sandbox_for(&r).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let meta = || Meta {
        duration_ms: started.elapsed().as_millis() as u64,
        session_id: Some(r.id.clone()),
        ..Meta::default()
    };
    if directories::is_tar(&headers) {
        return match directories::unpack_tar(&r.wharf, &held, &q.path, spooled).await {
            Ok(written) => Envelope::ok(
                json!({"path": q.path, "bytes_written": written, "directory": true}),
                meta(),
            )
            .into_response(),
            Err(e) => failure(e),
        };
    }
    let mut spooled =
        match directories::write_through_agent(&r.wharf, &held, &q.path, spooled).await {
            Ok(Ok(written)) => {
                return Envelope::ok(json!({"path": q.path, "bytes_written": written}), meta())
                    .into_response();
            }
            Ok(Err(e)) => return failure(e),
            // No agent in this sandbox: the provider writes it, a chunk at a time.
            Err(spooled) => spooled,
        };
    let mut written: u64 = 0;
    loop {
        let piece = match spooled.next_piece(UPLOAD_CHUNK).await {
            Ok(piece) => piece,
            Err(e) => return failure(e),
        };
        let first = written == 0;
        if piece.is_empty() && !first {
            break;
        }
        let len = piece.len() as u64;
        let result = if first {
            held.write(&q.path, piece).await
        } else {
            held.append(&q.path, piece).await
        };
        if let Err(e) = result {
            return failure(e);
        }
        written += len;
        if len == 0 || written >= spooled.len {
            break;
        }
    }
    Envelope::ok(json!({"path": q.path, "bytes_written": written}), meta()).into_response()
}

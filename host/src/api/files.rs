//! `GET`/`PUT /v1/sessions/{id}/files?path=`: large files in and out of a sandbox session
//! outside tool calls, streamed in slices (download) and chunks (upload).

use crate::api::auth::Caller;
use crate::api::envelope::{Envelope, Meta};
use crate::config::TokenScope;
use crate::error_code::WharfError;
use crate::front_door::Wharf;
use crate::runtime::backend::{SLICE_BYTES, SandboxFiles};
use crate::runtime::guest_types::SessionView;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

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

/// A sandbox session held for one transfer: its provider, its handle, and its turn (no
/// other call runs in the session meanwhile).
struct HeldSandbox {
    backend: Arc<crate::runtime::loaded_backend::LoadedBackend>,
    session: SessionView,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl HeldSandbox {
    fn files(&self) -> Result<&dyn SandboxFiles, WharfError> {
        self.backend.behaviour().files().ok_or_else(|| {
            WharfError::invalid_request(format!(
                "backend `{}` has no sandbox to move files in and out of",
                self.backend.name
            ))
        })
    }

    async fn size(&self, path: &str) -> Result<u64, WharfError> {
        self.files()?.size(&self.session, path).await
    }

    async fn slice(&self, path: &str, index: u64) -> Result<Vec<u8>, WharfError> {
        self.files()?.slice(&self.session, path, index).await
    }

    async fn write(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        self.files()?.write(&self.session, path, content).await
    }

    async fn append(&self, path: &str, content: Vec<u8>) -> Result<(), WharfError> {
        self.files()?.append(&self.session, path, content).await
    }
}

async fn sandbox_for(wharf: &Wharf, caller: &Caller, id: &str) -> Result<HeldSandbox, WharfError> {
    caller.require(TokenScope::Call)?;
    // The token's allowlist holds here as on `/v1/call`: moving files is using the backend.
    let visible = wharf.session(caller.session_tenant(), id).await?;
    caller.require_tool(&visible.backend, None)?;
    let (backend, record, turn) = wharf.sandbox_session(caller.session_tenant(), id).await?;
    Ok(HeldSandbox {
        backend,
        session: record.view(),
        _turn: turn,
    })
}

/// Streams a file out of the sandbox, slice by slice.
pub async fn download(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<FilePath>,
) -> Response {
    let held = match sandbox_for(&wharf, &caller, &id).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let size = match held.size(&q.path).await {
        Ok(size) => size,
        Err(e) => return failure(e),
    };
    let slices = size.div_ceil(SLICE_BYTES);
    let path = q.path.clone();
    let stream = futures::stream::unfold((0u64, held), move |(index, held)| {
        let path = path.clone();
        async move {
            if index >= slices {
                return None;
            }
            let slice = held
                .slice(&path, index)
                .await
                .map(bytes::Bytes::from)
                .map_err(std::io::Error::other);
            Some((slice, (index + 1, held)))
        }
    });
    Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/octet-stream")
        .header(axum::http::header::CONTENT_LENGTH, size)
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| failure(WharfError::internal(e.to_string())))
}

/// Streams a request body into a file in the sandbox.
pub async fn upload(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<FilePath>,
    body: Body,
) -> Response {
    let started = std::time::Instant::now();
    let held = match sandbox_for(&wharf, &caller, &id).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let mut stream = body.into_data_stream();
    let mut buffer: Vec<u8> = Vec::with_capacity(UPLOAD_CHUNK);
    let mut written: u64 = 0;
    let mut first = true;
    loop {
        let next = stream.next().await;
        let done = next.is_none();
        if let Some(chunk) = next {
            match chunk {
                Ok(bytes) => buffer.extend_from_slice(&bytes),
                Err(e) => {
                    return failure(WharfError::invalid_request(format!(
                        "the upload was interrupted: {e}"
                    )));
                }
            }
        }
        if buffer.len() >= UPLOAD_CHUNK || (done && (first || !buffer.is_empty())) {
            let piece = std::mem::take(&mut buffer);
            written += piece.len() as u64;
            let result = if first {
                held.write(&q.path, piece).await
            } else {
                held.append(&q.path, piece).await
            };
            if let Err(e) = result {
                return failure(e);
            }
            first = false;
        }
        if done {
            break;
        }
    }
    let mut meta = Meta {
        duration_ms: started.elapsed().as_millis() as u64,
        ..Meta::default()
    };
    meta.session_id = Some(id);
    Envelope::ok(json!({"path": q.path, "bytes_written": written}), meta).into_response()
}

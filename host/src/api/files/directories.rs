//! Directories and file information through the sandbox agent (docs/agents.md, "Files"):
//! a directory downloaded or uploaded as a tar stream on `/v1/sessions/{id}/files`, and
//! `GET …/files/info`, `…/files/list` and `…/files/watch` (newline-delimited JSON).
//! Everything is streamed: a tar stream in is spooled to disk first like any upload, a
//! tar stream out goes to the client as the sandbox makes it.

use std::future::Future;
use std::time::Duration;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::paced::paced_body;
use super::spool::Spooled;
use super::{UPLOAD_CHUNK, failure};
use crate::api::envelope::{Envelope, Meta};
use crate::api::json_body::parse_query;
use crate::api::route_answer::PathRoute;
use crate::error_code::{Code, WharfError};
use crate::front_door::{
    DEFAULT_WATCH_SECONDS, FileWatch, MAX_WATCH_SECONDS, SandboxFiles, SandboxTransfer, Wharf,
};
use wharf_sandbox_protocol::{FileEvent, FileInfo, FileKind};

/// The media type of a directory's tar stream, each way.
pub const TAR: &str = "application/x-tar";

/// `?path=` of the info and list routes.
#[derive(Deserialize)]
pub struct InfoQuery {
    path: String,
}

/// `?path=&recursive=&timeout_seconds=` of the watch route.
#[derive(Deserialize)]
pub struct WatchQuery {
    path: String,
    #[serde(default)]
    recursive: bool,
    timeout_seconds: Option<u64>,
}

/// A path's information as the API shows it.
pub fn info_json(info: &FileInfo) -> Value {
    json!({
        "name": info.name,
        "kind": info.kind.as_str(),
        "size": info.size,
        "mode": info.mode,
        "uid": info.owner.0,
        "gid": info.owner.1,
        "modified_ms": info.modified_ms,
        "link_target": info.link_target,
    })
}

/// One NDJSON line.
fn ndjson_line(value: &Value) -> bytes::Bytes {
    let mut line = value.to_string();
    line.push('\n');
    bytes::Bytes::from(line)
}

fn event_line(event: &FileEvent) -> bytes::Bytes {
    ndjson_line(&json!({
        "event": event.kind.as_str(),
        "path": event.path,
        "directory": event.directory,
    }))
}

/// The path's session's sandbox for file operations, for a caller that may use its backend.
async fn files_for(session: &PathRoute) -> Result<SandboxFiles, WharfError> {
    super::may_use_sandbox(session).await?;
    session
        .wharf
        .sandbox_files(session.session_tenant(), &session.id)
        .await
}

/// The session's sandbox and the `path` of an info or list query.
async fn files_at(
    session: &PathRoute,
    query: Result<Query<InfoQuery>, QueryRejection>,
) -> Result<(SandboxFiles, String), WharfError> {
    let q = parse_query(query)?;
    Ok((files_for(session).await?, q.path))
}

/// A session route's answer in the envelope.
async fn enveloped(
    session: &PathRoute,
    answer: impl Future<Output = Result<Value, WharfError>>,
) -> Response {
    match answer.await {
        Ok(data) => {
            let meta = Meta {
                session_id: Some(session.id.clone()),
                ..Meta::default()
            };
            Envelope::ok(data, meta).into_response()
        }
        Err(e) => failure(e),
    }
}

/// `GET /v1/sessions/{id}/files/info?path=`.
pub async fn info(r: PathRoute, query: Result<Query<InfoQuery>, QueryRejection>) -> Response {
    enveloped(&r, async {
        let (files, path) = files_at(&r, query).await?;
        Ok(info_json(&files.info(&path).await?))
    })
    .await
}

/// `GET /v1/sessions/{id}/files/list?path=`.
pub async fn list(r: PathRoute, query: Result<Query<InfoQuery>, QueryRejection>) -> Response {
    enveloped(&r, async {
        let (files, path) = files_at(&r, query).await?;
        let listing = files.list(&path).await?;
        let entries: Vec<Value> = listing.entries.iter().map(info_json).collect();
        Ok(json!({
            "path": path,
            "entries": entries,
            "truncated": listing.truncated,
        }))
    })
    .await
}

/// `GET /v1/sessions/{id}/files/watch?path=`: changes as newline-delimited JSON, from the
/// moment the response starts until `timeout_seconds` (default 300, at most 3600) pass,
/// the client leaves, or the sandbox goes away (a last line `{"event": "error"}` then).
pub async fn watch(r: PathRoute, query: Result<Query<WatchQuery>, QueryRejection>) -> Response {
    let opened = async {
        let q = parse_query(query)?;
        let seconds = q.timeout_seconds.unwrap_or(DEFAULT_WATCH_SECONDS);
        if seconds == 0 || seconds > MAX_WATCH_SECONDS {
            return Err(WharfError::new(
                Code::InvalidInput,
                format!("timeout_seconds is 1 to {MAX_WATCH_SECONDS}"),
            ));
        }
        let files = files_for(&r).await?;
        let watch = files.watch(&q.path, q.recursive).await?;
        Ok::<_, WharfError>((watch, Duration::from_secs(seconds)))
    };
    let (watch, lasts) = match opened.await {
        Ok(opened) => opened,
        Err(e) => return failure(e),
    };
    // The body's task holds the watch, and its slot.
    let stall = Duration::from_millis(r.wharf.server().upload_read_timeout_ms);
    let lines = paced_body(stall, Some(lasts), |out| async move {
        let mut watch: FileWatch = watch;
        loop {
            let line = match watch.next().await {
                Ok(Some(event)) => event_line(&event),
                Ok(None) => return,
                Err(e) => {
                    out.send(Ok(ndjson_line(
                        &json!({"event": "error", "message": e.message}),
                    )))
                    .await;
                    return;
                }
            };
            if !out.send(Ok(line)).await {
                return;
            }
        }
    });
    Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/x-ndjson")
        .header(axum::http::header::CACHE_CONTROL, "no-cache")
        .body(lines)
        .unwrap_or_else(|e| failure(WharfError::internal(e.to_string())))
}

/// What the agent found at `path` of the held session's sandbox.
pub(super) enum AtPath {
    /// A directory: it goes out as a tar stream.
    Directory(SandboxFiles),
    /// A regular file of this size: it goes out in one read.
    File(SandboxFiles, u64),
}

/// `path` in the held session's sandbox as its agent sees it; `None` (no agent, a
/// symlink, anything else, an error) sends the caller down the provider's single-file
/// path, which says what `path` is when it is not a file.
pub(super) async fn through_agent(
    wharf: &Wharf,
    held: &SandboxTransfer,
    path: &str,
) -> Option<AtPath> {
    let files = wharf.transfer_files(held).await.ok()?;
    let info = files.info(path).await.ok()?;
    match info.kind {
        FileKind::Directory => Some(AtPath::Directory(files)),
        FileKind::File => Some(AtPath::File(files, info.size)),
        _ => None,
    }
}

/// Streams what is at `path` out (a directory as a tar stream, a file with its
/// `Content-Length`), under the session's turn, which the body's task gives back when the
/// stream ends, stalls or outlives the session (`paced`).
pub(super) async fn stream_out(
    wharf: &Wharf,
    found: AtPath,
    held: SandboxTransfer,
    path: &str,
) -> Result<Response, WharfError> {
    let (mut output, kind, length) = match found {
        AtPath::Directory(files) => (files.tar_out(path).await?, TAR, None),
        AtPath::File(files, size) => (
            files.read(path, 0, size).await?,
            "application/octet-stream",
            Some(size),
        ),
    };
    let stall = Duration::from_millis(wharf.server().upload_read_timeout_ms);
    let lasts = held.lifetime_left();
    let body = paced_body(stall, lasts, |out| async move {
        let _turn = held;
        let mut sent = 0u64;
        loop {
            // An error mid-stream ends the body abruptly, so the client cannot take a cut
            // archive (or a file that changed size) for a whole one.
            let piece = match (output.recv().await, length) {
                (Some(Ok(chunk)), Some(size)) if sent + chunk.len() as u64 > size => {
                    Err(std::io::Error::other("the file grew while it was read"))
                }
                (Some(Ok(chunk)), _) => Ok(chunk),
                (Some(Err(e)), _) => Err(std::io::Error::other(e.to_string())),
                (None, Some(size)) if sent < size => {
                    Err(std::io::Error::other("the file shrank while it was read"))
                }
                (None, _) => return,
            };
            let failed = piece.is_err();
            if let Ok(chunk) = &piece {
                sent += chunk.len() as u64;
            }
            if !out.send(piece).await || failed {
                return;
            }
        }
    });
    let mut response = Response::builder().header(axum::http::header::CONTENT_TYPE, kind);
    if let Some(length) = length {
        response = response.header(axum::http::header::CONTENT_LENGTH, length);
    }
    response
        .body(body)
        .map_err(|e| WharfError::internal(e.to_string()))
}

/// Feeds a spooled upload, piece by piece, to `sink` (a file written or a tar stream
/// unpacked through the agent); the bytes fed, or the sink's error.
async fn feed_spooled<F>(
    mut spooled: Spooled,
    sink: impl FnOnce(tokio::sync::mpsc::Receiver<bytes::Bytes>) -> F,
) -> Result<u64, WharfError>
where
    F: std::future::Future<Output = Result<(), WharfError>>,
{
    let total = spooled.len;
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let feed = async move {
        let mut sent = 0u64;
        while sent < total {
            let piece = spooled.next_piece(UPLOAD_CHUNK).await?;
            if piece.is_empty() {
                break;
            }
            sent += piece.len() as u64;
            // The sink ended early (it failed): its error is the answer.
            if tx.send(bytes::Bytes::from(piece)).await.is_err() {
                break;
            }
        }
        Ok::<_, WharfError>(sent)
    };
    let (fed, sunk) = tokio::join!(feed, sink(rx));
    sunk?;
    fed
}

/// Unpacks a spooled tar stream into directory `path`, under the session's turn.
pub(super) async fn unpack_tar(
    wharf: &Wharf,
    held: &SandboxTransfer,
    path: &str,
    spooled: Spooled,
) -> Result<u64, WharfError> {
    let files = wharf.transfer_files(held).await?;
    feed_spooled(
        spooled,
        |input| async move { files.tar_in(path, input).await },
    )
    .await
}

/// Writes a spooled upload to file `path` through the agent, in one stream; `Err(spooled)`
/// when the sandbox runs no agent (the provider's path then writes it).
pub(super) async fn write_through_agent(
    wharf: &Wharf,
    held: &SandboxTransfer,
    path: &str,
    spooled: Spooled,
) -> Result<Result<u64, WharfError>, Spooled> {
    let Ok(files) = wharf.transfer_files(held).await else {
        return Err(spooled);
    };
    Ok(feed_spooled(
        spooled,
        |input| async move { files.write(path, input).await },
    )
    .await)
}

/// Whether an upload is a tar stream for a directory.
pub(super) fn is_tar(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(TAR))
}

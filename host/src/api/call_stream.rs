//! `POST /v1/call` with `Accept: application/x-ndjson`: the call's output as it is written
//! (a command's stdout and stderr), one JSON line per piece
//! (`{"output":{"stream":"stdout","text":"…"}}`) and per progress report of the backend's
//! (`{"progress":{"progress":1,"total":3,"message":"…"}}`), then the call's envelope as the
//! last line.
//! Once the stream has started the HTTP status is 200 and the last line's `code` is the
//! call's. A client that hangs up ends the call: its command is killed, as for any dropped
//! call.

use crate::api::envelope::Envelope;
use crate::call_output::CallEvent;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

/// The media type of a streamed call.
pub const NDJSON: &str = "application/x-ndjson";

/// The entries of the request's `Accept` headers (`type/subtype;param=value` each).
pub fn accept_entries(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
}

/// Whether the client asked for the streamed form.
pub fn wants_lines(headers: &HeaderMap) -> bool {
    accept_entries(headers).any(|v| {
        v.split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case(NDJSON))
    })
}

/// One line of output or progress.
fn piece_line(event: &CallEvent) -> Bytes {
    let mut line = match event {
        CallEvent::Output(piece) => json!({"output": {
            "stream": piece.stream.as_str(),
            "text": String::from_utf8_lossy(&piece.data),
        }}),
        CallEvent::Progress(report) => json!({"progress": {
            "progress": report.progress,
            "total": report.total,
            "message": report.message,
        }}),
    }
    .to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The last line.
fn envelope_line(envelope: &Envelope) -> Bytes {
    let mut line = serde_json::to_string(envelope).unwrap_or_else(|_| {
        r#"{"code":5000,"message":"the reply could not be encoded","data":null}"#.into()
    });
    line.push('\n');
    Bytes::from(line)
}

/// Ends the call when the response body is dropped (the client hung up).
struct EndsTheCall(tokio::task::AbortHandle);

impl Drop for EndsTheCall {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The streamed reply of a call running as `call` (spawned here), whose output arrives on
/// `pieces` and whose envelope on the channel `call` is given.
pub fn streamed<F>(pieces: mpsc::Receiver<CallEvent>, call: F) -> Response
where
    F: FnOnce(oneshot::Sender<Envelope>) -> tokio::task::JoinHandle<()>,
{
    let (done_tx, done_rx) = oneshot::channel();
    let task = call(done_tx);
    let state = (pieces, done_rx, EndsTheCall(task.abort_handle()), false);
    let lines = futures::stream::unfold(state, |(mut pieces, mut done, guard, over)| async move {
        if over {
            return None;
        }
        tokio::select! {
            biased;
            Some(piece) = pieces.recv() => {
                Some((Ok::<_, std::convert::Infallible>(piece_line(&piece)), (pieces, done, guard, false)))
            }
            envelope = &mut done => {
                let line = match envelope {
                    Ok(envelope) => envelope_line(&envelope),
                    Err(_) => envelope_line(&Envelope::error(
                        crate::error_code::WharfError::internal("the call ended without a reply"),
                        Default::default(),
                    )),
                };
                // What was written before the call ended comes first.
                let mut rest = Vec::new();
                while let Ok(piece) = pieces.try_recv() {
                    rest.extend_from_slice(&piece_line(&piece));
                }
                rest.extend_from_slice(&line);
                Some((Ok(Bytes::from(rest)), (pieces, done, guard, true)))
            }
        }
    });
    let mut response = Body::from_stream(lines).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_header_decides() {
        let mut h = HeaderMap::new();
        assert!(!wants_lines(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_lines(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, Application/X-NDJSON;q=0.9"),
        );
        assert!(wants_lines(&h));
    }
}

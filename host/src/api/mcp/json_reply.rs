//! MCP answers as one JSON body where the client accepts one. The streamable-HTTP transport
//! lets a server answer a POST with `application/json` or `text/event-stream`; `rmcp`
//! answers every request of a stateful MCP session as an SSE stream (a priming event, the
//! message, the end of the chunked body): several writes for one message. When the client
//! accepts JSON and the stream's first message is the request's response, the response goes
//! out alone, as JSON with a `Content-Length`. A stream whose first message is anything else
//! (a notification or a request to the client) passes on as SSE, nothing lost.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, header};
use http_body_util::BodyExt;
use serde::Deserialize;

/// The middleware: see the module doc.
pub async fn one_message(request: Request, next: Next) -> Response {
    let wants_json =
        request.method() == Method::POST && accepts(request.headers(), "application/json");
    let response = next.run(request).await;
    if !wants_json || !is_event_stream(response.headers()) {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut seen = BytesMut::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen.extend_from_slice(&data);
        match first_message(&seen) {
            Scan::NeedMore => continue,
            Scan::Other => break,
            Scan::Response(message) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                // The rest of the stream (its end) is dropped with `body`.
                return Response::from_parts(parts, Body::from(message));
            }
        }
    }
    let rest = futures::stream::once(async move { Ok::<Bytes, axum::Error>(seen.freeze()) })
        .chain(body.into_data_stream());
    Response::from_parts(parts, Body::from_stream(rest))
}

/// Whether the `Accept` headers list `media` with a weight above zero.
pub(super) fn accepts(headers: &HeaderMap, media: &str) -> bool {
    crate::api::call_stream::accept_entries(headers).any(|entry| {
        let mut fields = entry.split(';');
        let essence = fields.next().unwrap_or("").trim();
        let refused = fields.any(|p| {
            p.split_once('=').is_some_and(|(name, weight)| {
                name.trim().eq_ignore_ascii_case("q")
                    && weight.trim().parse::<f32>().is_ok_and(|w| w <= 0.0)
            })
        });
        essence.eq_ignore_ascii_case(media) && !refused
    })
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

enum Scan {
    /// No event with data yet.
    NeedMore,
    /// The first message is a response: its JSON.
    Response(Bytes),
    /// The first message is a notification or a request.
    Other,
}

/// Which fields a JSON-RPC message has: a response has an `id` and no `method`.
#[derive(Deserialize)]
struct Shape {
    id: Option<serde::de::IgnoredAny>,
    method: Option<serde::de::IgnoredAny>,
}

/// The first complete SSE event of `stream` that carries data (priming events and
/// keep-alive comments carry none).
fn first_message(stream: &[u8]) -> Scan {
    let text = match std::str::from_utf8(stream) {
        Ok(text) => text,
        // A multi-byte character cut between frames: wait for the rest.
        Err(e) if e.error_len().is_none() => return Scan::NeedMore,
        Err(_) => return Scan::Other,
    };
    let normalised;
    let text = if text.contains('\r') {
        normalised = text.replace("\r\n", "\n");
        normalised.as_str()
    } else {
        text
    };
    let mut events = text.split("\n\n").collect::<Vec<_>>();
    // The part after the last blank line is an event still arriving.
    events.pop();
    for event in events {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let data = data.join("\n");
        if data.is_empty() {
            continue;
        }
        return match serde_json::from_str::<Shape>(&data) {
            Ok(Shape {
                id: Some(_),
                method: None,
            }) => Scan::Response(Bytes::from(data)),
            _ => Scan::Other,
        };
    }
    Scan::NeedMore
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &str) -> &'static str {
        match first_message(s.as_bytes()) {
            Scan::NeedMore => "more",
            Scan::Response(_) => "response",
            Scan::Other => "other",
        }
    }

    #[test]
    fn the_first_message_decides() {
        assert_eq!(scan("id: 0\nretry: 3000\ndata:\n\n"), "more");
        assert_eq!(scan("data:\n\n: ping\n\ndata: {\"jsonrpc\""), "more");
        assert_eq!(
            scan("data:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 0/1\n\n"),
            "response"
        );
        assert_eq!(
            scan("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"),
            "other"
        );
        assert_eq!(
            scan("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\"}\n\n"),
            "other"
        );
        assert_eq!(scan("data: not json\n\n"), "other");
    }

    #[test]
    fn accept_lists_are_read_whole() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json;q=0.9"),
        );
        assert!(accepts(&h, "application/json"));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        assert!(!accepts(&h, "application/json"));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;q=0, text/event-stream"),
        );
        assert!(!accepts(&h, "application/json"));
        assert!(accepts(&h, "text/event-stream"));
    }
}

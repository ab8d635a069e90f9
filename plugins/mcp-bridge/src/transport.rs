//! One HTTP exchange over `wasi:http`, with the body read chunk by chunk so the caller can
//! stop as soon as it has what it needs, and one deadline for the whole exchange (connect,
//! headers and body). `wharf_sdk::http` reads a whole body at once; a hostile server's
//! endless stream must not be. An exchange the call's caller gives up on ends at once (the
//! waits are cut into short slices, asking the `cancellation` import between them).

use crate::client::CALLER_CANCELLED;
use std::time::Duration;
use wharf_sdk::ToolError;
use wharf_sdk::bindings::backend_world::wasi::clocks::monotonic_clock;
use wharf_sdk::bindings::backend_world::wasi::http::{outgoing_handler, types as wasi};
use wharf_sdk::bindings::backend_world::wasi::io::{poll, streams::StreamError};
use wharf_sdk::bindings::backend_world::wharf::plugin0_2_0::egress;
use wharf_sdk::host::cancellation;

/// The largest chunk `wasi:io` accepts in one blocking write.
const WRITE_CHUNK: usize = 4096;
/// The most bytes asked of the body stream at once.
const READ_CHUNK: u64 = 64 * 1024;
/// How long a wait goes without asking whether the caller gave up, ns.
const CANCEL_CHECK_NANOS: u64 = 200_000_000;

/// What an exchange does when the call's caller gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCancel {
    /// Ends at once with 4990 (a request the caller waits for).
    End,
    /// Goes on to its own deadline (telling the server of a cancel, saying goodbye).
    Finish,
}

/// The HTTP method of an exchange.
#[derive(Debug, Clone, Copy)]
pub enum Method {
    /// `POST`: every MCP message.
    Post,
    /// `DELETE`: ends the MCP session.
    Delete,
}

/// A response whose headers are in and whose body is read on demand.
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    // Field order is drop order: the stream is a child of the body.
    stream: wasi::InputStream,
    _body: wasi::IncomingBody,
    deadline: u64,
    place: String,
    on_cancel: OnCancel,
}

impl Response {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next chunk of the body; `None` at its end. Waits at most until the deadline.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, ToolError> {
        loop {
            match self.stream.read(READ_CHUNK) {
                Ok(bytes) if !bytes.is_empty() => return Ok(Some(bytes)),
                Ok(_) => wait(
                    &self.stream.subscribe(),
                    self.deadline,
                    &self.place,
                    self.on_cancel,
                )?,
                Err(StreamError::Closed) => return Ok(None),
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(match wasi::http_error_code(&e) {
                        Some(code) => failure(&self.place, code),
                        None => ToolError::execution(format!(
                            "reading the answer of {} failed: {}",
                            self.place,
                            e.to_debug_string()
                        ))
                        .retryable(),
                    });
                }
            }
        }
    }

    /// The whole body, refused past `max` bytes.
    pub fn read_to_end(&mut self, max: usize) -> Result<Vec<u8>, ToolError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk()? {
            if body.len() + chunk.len() > max {
                return Err(ToolError::execution(format!(
                    "{} sent a body of more than {max} bytes",
                    self.place
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Blocks until `pollable` is ready or the deadline passes (5006).
/// With [`OnCancel::End`], a caller that gave up ends the wait with 4990.
fn wait(
    pollable: &poll::Pollable,
    deadline: u64,
    place: &str,
    on_cancel: OnCancel,
) -> Result<(), ToolError> {
    loop {
        let until = match on_cancel {
            OnCancel::End => {
                deadline.min(monotonic_clock::now().saturating_add(CANCEL_CHECK_NANOS))
            }
            OnCancel::Finish => deadline,
        };
        let timer = monotonic_clock::subscribe_instant(until);
        if poll::poll(&[pollable, &timer]).contains(&0) {
            return Ok(());
        }
        if monotonic_clock::now() >= deadline {
            return Err(ToolError::timeout(format!(
                "{place} did not answer in time"
            )));
        }
        if on_cancel == OnCancel::End && cancellation::cancelled() {
            return Err(ToolError::new(
                CALLER_CANCELLED,
                format!("the caller cancelled the call while {place} was answering"),
            ));
        }
    }
}

/// `scheme://host[:port]/path` of `url`, without user info or query, for messages.
pub fn display_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!("{scheme}://{host}{path}")
}

/// Sends one request and waits for the response's headers; the body is read through the
/// [`Response`]. The whole exchange shares one deadline, `timeout` from now, and does
/// `on_cancel` when the caller gives up.
pub fn send(
    method: Method,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
    on_cancel: OnCancel,
) -> Result<Response, ToolError> {
    let place = format!("the MCP server at {}", display_url(url));
    let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let deadline = monotonic_clock::now().saturating_add(nanos);
    let invalid = |what: &str| ToolError::invalid_input(format!("{what} in `url` ({place})"));
    let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("no scheme"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => wasi::Scheme::Http,
        "https" => wasi::Scheme::Https,
        _ => return Err(invalid("not http or https")),
    };
    let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let path = if path.is_empty() {
        "/".to_string()
    } else if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let fields: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    // The error names no header value: a value may hold a secret.
    let fields = wasi::Fields::from_list(&fields).map_err(|e| {
        ToolError::invalid_input(format!("a configured header was refused ({e:?})"))
    })?;
    let request = wasi::OutgoingRequest::new(fields);
    let method = match method {
        Method::Post => wasi::Method::Post,
        Method::Delete => wasi::Method::Delete,
    };
    request
        .set_method(&method)
        .map_err(|()| invalid("invalid method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("invalid scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| invalid("invalid host"))?;
    request
        .set_path_with_query(Some(&path))
        .map_err(|()| invalid("invalid path"))?;
    let options = wasi::RequestOptions::new();
    // A host may refuse a timeout it cannot honour; the deadline below still holds.
    let _ = options.set_connect_timeout(Some(nanos));
    let _ = options.set_first_byte_timeout(Some(nanos));
    let _ = options.set_between_bytes_timeout(Some(nanos));
    let outgoing = request
        .body()
        .map_err(|()| ToolError::execution("the request body was already taken"))?;
    let pending =
        outgoing_handler::handle(request, Some(options)).map_err(|e| refusal(url, &place, e))?;
    write_body(&outgoing, body, &place)?;
    wasi::OutgoingBody::finish(outgoing, None).map_err(|e| refusal(url, &place, e))?;
    wait(&pending.subscribe(), deadline, &place, on_cancel)?;
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return Err(refusal(url, &place, e)),
        Some(Err(())) | None => {
            return Err(ToolError::execution(format!("no answer from {place}")).retryable());
        }
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    let incoming = response
        .consume()
        .map_err(|()| ToolError::execution("the response body was already taken"))?;
    let stream = incoming
        .stream()
        .map_err(|()| ToolError::execution("the response body stream was already taken"))?;
    Ok(Response {
        status,
        headers,
        stream,
        _body: incoming,
        deadline,
        place,
        on_cancel,
    })
}

fn write_body(body: &wasi::OutgoingBody, bytes: &[u8], place: &str) -> Result<(), ToolError> {
    let stream = body
        .write()
        .map_err(|()| ToolError::execution("the request body stream was already taken"))?;
    for chunk in bytes.chunks(WRITE_CHUNK) {
        stream.blocking_write_and_flush(chunk).map_err(|e| {
            ToolError::execution(format!("sending the request to {place} failed: {e:?}"))
                .retryable()
        })?;
    }
    Ok(())
}

/// A failure to send, with a refusal by the operator's policy named as such (4030, asked
/// of the host's `egress.check`, which names the grant).
fn refusal(url: &str, place: &str, e: wasi::ErrorCode) -> ToolError {
    match e {
        wasi::ErrorCode::HttpRequestDenied | wasi::ErrorCode::DestinationIpProhibited => {
            match egress::check(url) {
                Err(why) => ToolError::from(why),
                Ok(()) => ToolError::forbidden(format!(
                    "outbound HTTP to {place} was refused ({e:?}): the operator grants hosts \
                     with `grants.http_hosts` and loopback/private addresses with \
                     `grants.http_private_cidrs`"
                )),
            }
        }
        other => failure(place, other),
    }
}

/// A transport failure: timeouts are 5006, the rest 5000, all retryable.
fn failure(place: &str, e: wasi::ErrorCode) -> ToolError {
    match e {
        wasi::ErrorCode::ConnectionTimeout
        | wasi::ErrorCode::ConnectionReadTimeout
        | wasi::ErrorCode::ConnectionWriteTimeout
        | wasi::ErrorCode::HttpResponseTimeout => {
            ToolError::timeout(format!("{place} did not answer in time ({e:?})"))
        }
        other => ToolError::execution(format!("{place} is unreachable: {other:?}")).retryable(),
    }
}

//! Outbound HTTP over `wasi:http`, blocking, with a timeout, and with a refusal turned into
//! a [`ToolError`] (4030) that names the grant the operator has to add.
//!
//! ```ignore
//! let page = wharf_sdk::http::get("https://api.example.com/status")?.text();
//! let made: Created = wharf_sdk::http::post_json("https://api.example.com/items", &item)?.json()?;
//! ```
//!
//! The operator grants hosts with `grants.http_hosts = ["api.example.com:443"]`; a name that
//! resolves to a loopback, private or link-local address needs `grants.http_private_cidrs`
//! as well.

use crate::ToolError;
use crate::bindings::backend_world::wasi::http::{outgoing_handler, types as wasi};
use crate::bindings::backend_world::wasi::io::streams::StreamError;
use crate::bindings::backend_world::wharf::plugin0_2_0::egress;
use crate::codes;
use serde::{Serialize, de::DeserializeOwned};
use std::time::Duration;

pub use ::http::Method;

/// The timeout of a request that sets none: to connect, to the first byte, and between
/// two chunks of the body.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest chunk `wasi:io` accepts in one blocking write.
const WRITE_CHUNK: usize = 4096;

/// A request being built; [`Request::send`] sends it.
#[derive(Debug, Clone)]
pub struct Request {
    method: ::http::Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Duration,
}

/// A response with its whole body read.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The response headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The body parsed as JSON into `T`; a body that does not fit is 5000.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ToolError::execution(format!(
                "the response (status {}) is not the JSON expected: {e}",
                self.status
            ))
        })
    }
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, ToolError> {
    Request::get(url).send()
}

/// `POST url` with `body` as JSON.
pub fn post_json<T: Serialize + ?Sized>(url: &str, body: &T) -> Result<Response, ToolError> {
    Request::post(url).json(body)?.send()
}

impl Request {
    /// A request with any method (`GET`, `PUT`, …).
    pub fn new(method: Method, url: &str) -> Self {
        Self {
            method,
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
    /// A `GET`.
    pub fn get(url: &str) -> Self {
        Self::new(::http::Method::GET, url)
    }
    /// A `POST`.
    pub fn post(url: &str) -> Self {
        Self::new(::http::Method::POST, url)
    }
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
    /// Sets `value` as a JSON body with `content-type: application/json`.
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Result<Self, ToolError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| ToolError::invalid_input(format!("the body is not JSON: {e}")))?;
        Ok(self.header("content-type", "application/json").body(body))
    }
    /// Sets the timeout to connect, to the first byte and between two body chunks.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the request and reads the whole response. A destination the operator has not
    /// granted is 4030 naming the grant; a timeout is 5006; other failures are 5000.
    pub fn send(self) -> Result<Response, ToolError> {
        let uri: ::http::Uri = self
            .url
            .parse()
            .map_err(|e| ToolError::invalid_input(format!("`{}` is not a URL: {e}", self.url)))?;
        let scheme = match uri.scheme_str() {
            Some("http") => wasi::Scheme::Http,
            Some("https") => wasi::Scheme::Https,
            _ => {
                return Err(ToolError::invalid_input(format!(
                    "`{}` is not an http:// or https:// URL",
                    self.url
                )));
            }
        };
        let Some(authority) = uri.authority() else {
            return Err(ToolError::invalid_input(format!(
                "`{}` names no host",
                self.url
            )));
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let fields: Vec<(String, Vec<u8>)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
            .collect();
        let headers = wasi::Fields::from_list(&fields)
            .map_err(|e| ToolError::invalid_input(format!("a header is not allowed: {e:?}")))?;
        let request = wasi::OutgoingRequest::new(headers);
        let method = match self.method.as_str() {
            "GET" => wasi::Method::Get,
            "HEAD" => wasi::Method::Head,
            "POST" => wasi::Method::Post,
            "PUT" => wasi::Method::Put,
            "DELETE" => wasi::Method::Delete,
            "PATCH" => wasi::Method::Patch,
            "OPTIONS" => wasi::Method::Options,
            other => wasi::Method::Other(other.to_string()),
        };
        let refused = |what: &str| ToolError::invalid_input(format!("{what} of `{}`", self.url));
        request
            .set_method(&method)
            .map_err(|()| refused("invalid method"))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| refused("invalid scheme"))?;
        request
            .set_authority(Some(authority.as_str()))
            .map_err(|()| refused("invalid host"))?;
        request
            .set_path_with_query(Some(path))
            .map_err(|()| refused("invalid path"))?;
        let options = wasi::RequestOptions::new();
        let nanos = u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX);
        // A host may refuse a timeout it cannot honour; the call's own deadline still holds.
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        let _ = options.set_between_bytes_timeout(Some(nanos));
        let body = request
            .body()
            .map_err(|()| ToolError::execution("the request body was already taken"))?;
        let pending =
            outgoing_handler::handle(request, Some(options)).map_err(|e| failure(&self.url, e))?;
        write_body(&body, &self.body)?;
        wasi::OutgoingBody::finish(body, None).map_err(|e| failure(&self.url, e))?;
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(e))) => return Err(failure(&self.url, e)),
            Some(Err(())) | None => {
                return Err(ToolError::execution(format!(
                    "no response from `{}`",
                    self.url
                )));
            }
        };
        read_response(&self.url, response)
    }
}

fn write_body(body: &wasi::OutgoingBody, bytes: &[u8]) -> Result<(), ToolError> {
    let stream = body
        .write()
        .map_err(|()| ToolError::execution("the request body stream was already taken"))?;
    for chunk in bytes.chunks(WRITE_CHUNK) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| ToolError::execution(format!("sending the request body failed: {e:?}")))?;
    }
    Ok(())
}

fn read_response(url: &str, response: wasi::IncomingResponse) -> Result<Response, ToolError> {
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
    let mut body = Vec::new();
    {
        let stream = incoming
            .stream()
            .map_err(|()| ToolError::execution("the response body stream was already taken"))?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(ToolError::execution(format!(
                        "reading the response from `{url}` failed: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
    }
    drop(incoming);
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A `wasi:http` failure as a tool error; a refusal names the grant (asked of the host's
/// `egress.check`, which knows the operator's policy).
fn failure(url: &str, e: wasi::ErrorCode) -> ToolError {
    match e {
        wasi::ErrorCode::HttpRequestDenied | wasi::ErrorCode::DestinationIpProhibited => {
            match egress::check(url) {
                Err(why) => ToolError::from(why),
                Ok(()) => ToolError::new(
                    codes::FORBIDDEN,
                    format!(
                        "outbound HTTP to `{url}` was refused ({e:?}): the operator grants hosts with `grants.http_hosts` and loopback/private addresses with `grants.http_private_cidrs`"
                    ),
                ),
            }
        }
        wasi::ErrorCode::ConnectionTimeout
        | wasi::ErrorCode::ConnectionReadTimeout
        | wasi::ErrorCode::ConnectionWriteTimeout
        | wasi::ErrorCode::HttpResponseTimeout => {
            ToolError::timeout(format!("`{url}` did not answer in time ({e:?})"))
        }
        other => {
            ToolError::execution(format!("the request to `{url}` failed: {other:?}")).retryable()
        }
    }
}

//! The preview listener (`[server] preview_listen`): HTTP, streamed responses and WebSocket
//! upgrades proxied to a port a session exposes, on an origin that is never the API's. A
//! request names its session and port by `Host` (`{port}-{session}.{preview_domain}`) or,
//! without a preview domain, by path (`/{session}/{port}/...`, the prefix taken off). It is
//! let in by the session's tenant token (`Authorization: Bearer`), or by a signed URL
//! (`?wharf_preview_expires=…&wharf_preview_signature=…`), which then leaves a cookie for
//! the page's other requests, scoped to the preview. Neither the token, the signature nor
//! the cookie reaches the sandbox.

use crate::api::auth::Authenticator;
use crate::api::envelope::{Envelope, Meta};
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{PreviewAccess, Wharf};
use crate::preview_signature::{EXPIRES_PARAM, SIGNATURE_PARAM, parse_host, parse_path};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use std::sync::Arc;

/// The cookie a signed URL leaves: `{expires}.{signature}`.
const COOKIE: &str = "wharf_preview";

struct PreviewState {
    wharf: Arc<Wharf>,
    authenticator: Authenticator,
}

/// The preview listener's routes: everything goes to the proxy.
pub fn router(wharf: Arc<Wharf>) -> anyhow::Result<axum::Router> {
    let authenticator = Authenticator::new(&wharf.server().auth)?;
    let state = Arc::new(PreviewState {
        wharf,
        authenticator,
    });
    Ok(axum::Router::new().fallback(proxy).with_state(state))
}

fn refuse(err: WharfError) -> Response {
    Envelope::error(err, Meta::default()).into_response()
}

/// Where a request goes: session, port, the path to forward, and the cookie's path.
struct Target {
    session: String,
    port: u16,
    path: String,
    cookie_path: String,
}

fn target(state: &PreviewState, request: &Request) -> Result<Target, WharfError> {
    let not_a_preview = || {
        WharfError::new(
            Code::InvalidRequest,
            "not a preview: use the URL a preview route or tool gave",
        )
    };
    let path = request.uri().path();
    match &state.wharf.server().preview_domain {
        Some(domain) => {
            let host = request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let (session, port) = parse_host(host, domain).ok_or_else(not_a_preview)?;
            Ok(Target {
                session,
                port,
                path: path.to_string(),
                cookie_path: "/".to_string(),
            })
        }
        None => {
            let (session, port, rest) = parse_path(path).ok_or_else(not_a_preview)?;
            let cookie_path = format!("/{session}/{port}/");
            Ok(Target {
                session,
                port,
                path: rest,
                cookie_path,
            })
        }
    }
}

/// Where a request's signature came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signed {
    /// The URL's query: the answer leaves the cookie.
    Query(u64, String),
    /// The cookie a signed URL left.
    Cookie(u64, String),
}

impl Signed {
    fn parts(&self) -> (u64, &str) {
        match self {
            Signed::Query(expires, signature) | Signed::Cookie(expires, signature) => {
                (*expires, signature)
            }
        }
    }
}

/// The signed URL's expiry and signature, from the query or else the cookie; and the query
/// without them.
fn signed(request: &Request) -> (Option<Signed>, String) {
    let mut expires = None;
    let mut signature = None;
    let mut kept = Vec::new();
    for pair in request.uri().query().unwrap_or_default().split('&') {
        match pair.split_once('=') {
            Some((EXPIRES_PARAM, v)) => expires = v.parse::<u64>().ok(),
            Some((SIGNATURE_PARAM, v)) => signature = Some(v.to_string()),
            _ if pair.is_empty() => {}
            _ => kept.push(pair),
        }
    }
    let from_query = expires
        .zip(signature)
        .map(|(expires, signature)| Signed::Query(expires, signature));
    let cookie_prefix = format!("{COOKIE}=");
    let from_cookie = || {
        request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix(&cookie_prefix))
            .find_map(|v| {
                let (expires, sig) = v.split_once('.')?;
                Some(Signed::Cookie(expires.parse().ok()?, sig.to_string()))
            })
    };
    (from_query.or_else(from_cookie), kept.join("&"))
}

/// The request as the sandbox's server gets it: origin-form URI, no credentials of the
/// host's (the bearer token, the preview cookie).
fn forwarded(mut request: Request, path: &str, query: &str) -> Result<Request, WharfError> {
    let uri = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    *request.uri_mut() = uri
        .parse()
        .map_err(|_| WharfError::new(Code::InvalidRequest, "a path that is not a URI"))?;
    let headers = request.headers_mut();
    headers.remove(header::AUTHORIZATION);
    let cookies: Vec<String> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.starts_with(&format!("{COOKIE}=")))
        .map(str::to_string)
        .collect();
    headers.remove(header::COOKIE);
    if !cookies.is_empty()
        && let Ok(value) = HeaderValue::from_str(&cookies.join("; "))
    {
        headers.insert(header::COOKIE, value);
    }
    Ok(request)
}

async fn proxy(State(state): State<Arc<PreviewState>>, request: Request) -> Response {
    match proxied(&state, request).await {
        Ok(response) => response,
        Err(e) => refuse(e),
    }
}

async fn proxied(state: &PreviewState, mut request: Request) -> Result<Response, WharfError> {
    let target = target(state, &request)?;
    let (signed, query) = signed(&request);
    let stream = match &signed {
        Some(signed) => {
            let (expires_at_s, signature) = signed.parts();
            let access = PreviewAccess::Signed {
                expires_at_s,
                signature,
            };
            state
                .wharf
                .open_preview(access, &target.session, target.port)
                .await?
        }
        None => {
            let header = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            let caller = state.authenticator.authenticate(header).await?;
            caller.require(TokenScope::Call)?;
            let access = PreviewAccess::Caller(caller.principal());
            state
                .wharf
                .open_preview(access, &target.session, target.port)
                .await?
        }
    };
    let upgrade = request.headers().contains_key(header::UPGRADE);
    let incoming_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let mut request = forwarded(request, &target.path, &query)?;
    if !upgrade {
        drop_hop_by_hop(request.headers_mut());
    }
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable_port(target.port, &e))?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable_port(target.port, &e))?;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(incoming) = incoming_upgrade
    {
        let outgoing = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            if let (Ok(client), Ok(sandbox)) = (incoming.await, outgoing.await) {
                let (mut client, mut sandbox) = (TokioIo::new(client), TokioIo::new(sandbox));
                let _ = tokio::io::copy_bidirectional(&mut client, &mut sandbox).await;
            }
        });
    }
    let mut response = response.map(Body::new);
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        drop_hop_by_hop(response.headers_mut());
    }
    if let Some(Signed::Query(expires, signature)) = signed {
        let cookie = format!(
            "{COOKIE}={expires}.{signature}; Path={}; HttpOnly; SameSite=Lax",
            target.cookie_path
        );
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    Ok(response)
}

/// Removes what concerns one connection only (RFC 9110, 7.6.1): the sandbox's server
/// closing its relay must not close the person's connection to the listener.
fn drop_hop_by_hop(headers: &mut axum::http::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
}

fn unreachable_port(port: u16, e: &hyper::Error) -> WharfError {
    WharfError::new(
        Code::DependencyFailure,
        format!("the sandbox's server on port {port} did not answer over HTTP: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, cookie: Option<&str>) -> Request {
        let mut builder = axum::http::Request::builder().uri(uri);
        if let Some(c) = cookie {
            builder = builder.header(header::COOKIE, c);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn signatures_come_from_the_query_or_the_cookie_and_never_go_on() {
        let r = request(
            "/s/1/x?a=1&wharf_preview_expires=99&wharf_preview_signature=ab&b=2",
            None,
        );
        let (signed, query) = signed(&r);
        assert_eq!(signed, Some(Signed::Query(99, "ab".to_string())));
        assert_eq!(query, "a=1&b=2");
        let r = request("/s/1/x", Some("theirs=1; wharf_preview=77.cd"));
        assert_eq!(signed_of(&r), Some(Signed::Cookie(77, "cd".to_string())));
        let f = forwarded(r, "/x", "").unwrap();
        assert_eq!(f.uri(), "/x");
        assert_eq!(f.headers()[header::COOKIE], "theirs=1");
        let r = axum::http::Request::builder()
            .uri("/s/1/")
            .header(header::AUTHORIZATION, "Bearer secret")
            .header(header::COOKIE, "wharf_preview=1.a")
            .body(Body::empty())
            .unwrap();
        let f = forwarded(r, "/", "q=1").unwrap();
        assert_eq!(f.uri(), "/?q=1");
        assert!(f.headers().get(header::AUTHORIZATION).is_none());
        assert!(f.headers().get(header::COOKIE).is_none());
    }

    #[test]
    fn hop_by_hop_headers_stay_on_their_hop() {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close, x-hop"));
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        drop_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key(header::CONTENT_TYPE));
    }

    fn signed_of(r: &Request) -> Option<Signed> {
        signed(r).0
    }
}

//! The egress proxy of sandboxes with an allowlist: an HTTP forward proxy (`CONNECT`
//! tunnels, so TLS stays end to end, and absolute-form `http://` requests) served in the
//! host process on connections a sandbox's agent hands over. The sandbox itself has no
//! network, so the proxy is the only way out.
//!
//! Every connection: the target checked against the session's [`EgressRule`] by name,
//! the name resolved once, every address checked (private, loopback, link-local and
//! metadata addresses only inside the session's ranges), the connection made to a checked
//! address, its bytes charged to the session's budget, and one audit line
//! (`event = "sandbox_egress"`) with what was asked, what happened and the bytes moved.

mod metered;
mod resolver;

pub use metered::{Counts, Meter, Metered};
pub use resolver::Resolver;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::policy::{EgressRefusal, EgressRule};

/// How long a connection to a destination may take (all its addresses together).
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// How long a sandbox may take to send a request's head.
const HEAD_LIMIT: Duration = Duration::from_secs(30);
/// The largest request head the proxy reads.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The copy buffer of a tunnel, each way.
const TUNNEL_BUFFER: usize = 256 * 1024;

/// One sandbox's egress: its rule, who it belongs to (for the audit line), its session's
/// budget and the resolver.
#[derive(Debug)]
pub struct EgressSession {
    /// What it may reach.
    pub rule: EgressRule,
    /// The backend that created the sandbox.
    pub backend: String,
    /// The session it belongs to (`-`: none).
    pub session: String,
    /// The container, shortened.
    pub container: String,
    /// The session's byte budget.
    pub meter: Arc<Meter>,
    /// How names are resolved.
    pub resolver: Arc<Resolver>,
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Serves one connection from a sandbox as an HTTP proxy until either side closes.
pub async fn serve<S>(stream: S, session: Arc<EgressSession>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let session = session.clone();
        async move { Ok::<_, Infallible>(handle(request, session).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_LIMIT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let _ = connection.await;
}

/// What one request asked, for its audit line.
struct Attempt {
    method: Method,
    host: String,
    port: u16,
    started: Instant,
}

async fn handle(
    mut request: Request<Incoming>,
    session: Arc<EgressSession>,
) -> Response<ProxyBody> {
    let method = request.method().clone();
    let Some((host, port)) = target(&request) else {
        let attempt = Attempt {
            method,
            host: "-".into(),
            port: 0,
            started: Instant::now(),
        };
        let why = "a proxy request is `CONNECT host:port` or an absolute `http://` URL";
        audit(&session, &attempt, None, &format!("refused: {why}"), None);
        return text(StatusCode::BAD_REQUEST, why);
    };
    let attempt = Attempt {
        method,
        host,
        port,
        started: Instant::now(),
    };
    let (upstream, address) = match open(&session, &attempt.host, attempt.port).await {
        Ok(opened) => opened,
        Err((status, why)) => {
            let outcome = if status == StatusCode::FORBIDDEN {
                format!("refused: {why}")
            } else {
                format!("failed: {why}")
            };
            audit(&session, &attempt, None, &outcome, None);
            return text(status, &why);
        }
    };
    let counts = Arc::new(Counts::default());
    let upstream = Metered::new(upstream, session.meter.clone(), counts.clone());
    if attempt.method == Method::CONNECT {
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let outcome = match upgrade.await {
                Ok(client) => {
                    let mut client = TokioIo::new(client);
                    let mut upstream = upstream;
                    match tokio::io::copy_bidirectional_with_sizes(
                        &mut client,
                        &mut upstream,
                        TUNNEL_BUFFER,
                        TUNNEL_BUFFER,
                    )
                    .await
                    {
                        Ok(_) => "allowed".to_string(),
                        Err(e) => format!("allowed, ended: {e}"),
                    }
                }
                Err(e) => format!("allowed, no tunnel: {e}"),
            };
            audit(&session, &attempt, Some(address), &outcome, Some(&counts));
        });
        return Response::new(empty());
    }
    forward(request, upstream, session, attempt, address, counts).await
}

/// Where a request goes: `CONNECT`'s authority, or an absolute `http://` URL's host and
/// port (80 by default).
fn target(request: &Request<Incoming>) -> Option<(String, u16)> {
    let uri = request.uri();
    let authority = uri.authority()?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    let port = if request.method() == Method::CONNECT {
        authority.port_u16()?
    } else if uri.scheme_str() == Some("http") {
        authority.port_u16().unwrap_or(80)
    } else {
        return None;
    };
    (port != 0).then(|| (host.to_ascii_lowercase(), port))
}

/// Checks `host:port`, resolves it once, checks every address and connects to one.
async fn open(
    session: &EgressSession,
    host: &str,
    port: u16,
) -> Result<(TcpStream, SocketAddr), (StatusCode, String)> {
    let forbidden = |r: EgressRefusal| (StatusCode::FORBIDDEN, r.to_string());
    if session.meter.spent() {
        return Err((
            StatusCode::FORBIDDEN,
            format!(
                "this session's egress budget of {} bytes is spent",
                session.rule.max_bytes
            ),
        ));
    }
    session.rule.check_target(host, port).map_err(forbidden)?;
    let addresses = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let found = session.resolver.resolve(host, port).await.map_err(|e| {
                (
                    StatusCode::BAD_GATEWAY,
                    format!("cannot resolve {host}: {e}"),
                )
            })?;
            session
                .rule
                .check_addresses(host, &found)
                .map_err(forbidden)?;
            found
        }
    };
    let attempts = async {
        let mut last = None;
        for ip in &addresses {
            let address = SocketAddr::new(*ip, port);
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok((stream, address)),
                Err(e) => last = Some(format!("{address}: {e}")),
            }
        }
        Err(last.unwrap_or_else(|| "no address".into()))
    };
    match tokio::time::timeout(CONNECT_LIMIT, attempts).await {
        Ok(Ok((stream, address))) => {
            let _ = stream.set_nodelay(true);
            Ok((stream, address))
        }
        Ok(Err(why)) => Err((StatusCode::BAD_GATEWAY, format!("cannot connect to {why}"))),
        Err(_) => Err((
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "{host}:{port} did not accept within {} s",
                CONNECT_LIMIT.as_secs()
            ),
        )),
    }
}

/// Sends an absolute-form `http://` request on to its destination, in origin form, and
/// streams the answer back.
async fn forward(
    mut request: Request<Incoming>,
    upstream: Metered<TcpStream>,
    session: Arc<EgressSession>,
    attempt: Attempt,
    address: SocketAddr,
    counts: Arc<Counts>,
) -> Response<ProxyBody> {
    let origin_form = request
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .parse()
        .unwrap_or_default();
    if !request.headers().contains_key(header::HOST)
        && let Some(authority) = request.uri().authority()
        && let Ok(value) = header::HeaderValue::from_str(authority.as_str())
    {
        request.headers_mut().insert(header::HOST, value);
    }
    *request.uri_mut() = origin_form;
    for name in ["proxy-connection", "proxy-authorization", "keep-alive"] {
        request.headers_mut().remove(name);
    }
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await;
    let (mut sender, connection) = match handshake {
        Ok(pair) => pair,
        Err(e) => {
            audit(
                &session,
                &attempt,
                Some(address),
                &format!("failed: {e}"),
                Some(&counts),
            );
            return text(StatusCode::BAD_GATEWAY, &e.to_string());
        }
    };
    // The connection is driven by its own task, which writes the audit line when it ends:
    // the bytes are known then.
    let status = Arc::new(std::sync::OnceLock::new());
    let seen = status.clone();
    tokio::spawn(async move {
        let ended = connection.await;
        let status: &String = seen.get_or_init(|| "none".to_string());
        let outcome = match ended {
            Ok(()) => format!("allowed, status {status}"),
            Err(e) => format!("allowed, status {status}, ended: {e}"),
        };
        audit(&session, &attempt, Some(address), &outcome, Some(&counts));
    });
    let answer = sender.send_request(request).await;
    let _ = status.set(
        answer
            .as_ref()
            .map(|r| r.status().as_u16().to_string())
            .unwrap_or_else(|e| format!("failed: {e}")),
    );
    drop(sender);
    match answer {
        Ok(response) => response.map(BodyExt::boxed),
        Err(e) => text(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

fn audit(
    session: &EgressSession,
    attempt: &Attempt,
    address: Option<SocketAddr>,
    outcome: &str,
    counts: Option<&Counts>,
) {
    let (sent, received) = counts.map_or((0, 0), |c| {
        (
            c.sent.load(Ordering::Relaxed),
            c.received.load(Ordering::Relaxed),
        )
    });
    tracing::info!(
        target: "wharf::audit",
        event = "sandbox_egress",
        backend = %session.backend,
        session = %session.session,
        container = %session.container,
        method = %attempt.method,
        host = %attempt.host,
        port = attempt.port,
        address = %address.map_or_else(|| "-".to_string(), |a| a.to_string()),
        outcome,
        bytes_sent = sent,
        bytes_received = received,
        session_bytes = session.meter.used(),
        duration_ms = attempt.started.elapsed().as_millis() as u64,
    );
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("wharf egress proxy: {message}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests;

//! The egress proxy of sandboxes with an allowlist: an HTTP forward proxy (`CONNECT`
//! tunnels, so TLS stays end to end, and absolute-form `http://` requests) served in the
//! host process on connections a sandbox's agent hands over. The sandbox itself has no
//! network, so the proxy is the only way out. Each connection carries one request: the
//! proxy reads and checks its head, and from then on the bytes flow both ways as they are
//! (`tunnel`), spliced in the kernel where the agent handed the program's socket over.
//!
//! Every connection: the target checked against the session's [`EgressRule`] by name,
//! the name resolved once, every address checked (private, loopback, link-local and
//! metadata addresses only inside the session's ranges), the connection made to a checked
//! address, its bytes charged to the session's budget, and one audit line
//! (`event = "sandbox_egress"`) with what was asked, what happened and the bytes moved.

mod metered;
mod request_head;
mod resolver;
mod tunnel;

pub use metered::{Counts, Meter, Metered};
pub use resolver::Resolver;
pub use tunnel::ProgramConnection;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::StatusCode;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use crate::policy::{EgressRefusal, EgressRule};
use request_head::HeadError;

/// How long a connection to a destination may take (all its addresses together).
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// How long a sandbox may take to send a request's head.
const HEAD_LIMIT: Duration = Duration::from_secs(30);

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

/// Serves one connection from a sandbox: one request head, checked; then a `CONNECT`
/// tunnel, or the request sent on to its destination and its answer streamed back, both
/// ways as they are until both sides close. Refusals are answered on the connection.
pub async fn serve(mut program: ProgramConnection, session: Arc<EgressSession>) {
    let started = Instant::now();
    let head = match tokio::time::timeout(HEAD_LIMIT, request_head::read(program.io())).await {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::Malformed(why))) => {
            let attempt = Attempt::unaimed("-".into(), started);
            refuse(
                &mut program,
                &session,
                &attempt,
                StatusCode::BAD_REQUEST,
                &why,
            )
            .await;
            return;
        }
        // Closed, failed or too slow before a whole head: nothing was asked.
        Ok(Err(HeadError::Closed | HeadError::Io(_))) | Err(_) => return,
    };
    let Some((host, port)) = head.target.clone() else {
        let attempt = Attempt::unaimed(head.method, started);
        let why = "a proxy request is `CONNECT host:port` or an absolute `http://` URL";
        refuse(
            &mut program,
            &session,
            &attempt,
            StatusCode::BAD_REQUEST,
            why,
        )
        .await;
        return;
    };
    let attempt = Attempt {
        method: head.method.clone(),
        host,
        port,
        started,
    };
    let (mut upstream, address) = match open(&session, &attempt.host, attempt.port).await {
        Ok(opened) => opened,
        Err((status, why)) => {
            refuse(&mut program, &session, &attempt, status, &why).await;
            return;
        }
    };
    let counts = Arc::new(Counts::default());
    let connect = head.is_connect();
    let mut first = head.forwarded.unwrap_or_default();
    first.extend_from_slice(&head.rest);
    let started_tunnel = async {
        if connect {
            program.io().write_all(b"HTTP/1.1 200 OK\r\n\r\n").await?;
        }
        if !session.meter.charge(&counts.sent, first.len()) {
            return Err(metered::spent());
        }
        upstream.write_all(&first).await
    };
    let outcome = match started_tunnel.await {
        Ok(()) => match tunnel::run(program, upstream, &session.meter, &counts).await {
            Ok(()) => "allowed".to_string(),
            Err(e) => format!("allowed, ended: {e}"),
        },
        Err(e) => format!("allowed, ended: {e}"),
    };
    audit(&session, &attempt, Some(address), &outcome, Some(&*counts));
}

/// What one request asked, for its audit line.
struct Attempt {
    method: String,
    host: String,
    port: u16,
    started: Instant,
}

impl Attempt {
    /// A request that named no target the proxy serves.
    fn unaimed(method: String, started: Instant) -> Self {
        Attempt {
            method,
            host: "-".into(),
            port: 0,
            started,
        }
    }
}

/// Refuses `attempt` with `status`: its audit line (`refused` for the program's fault,
/// `failed` for the destination's), and the answer on the connection, which then closes.
async fn refuse(
    program: &mut ProgramConnection,
    session: &EgressSession,
    attempt: &Attempt,
    status: StatusCode,
    why: &str,
) {
    let outcome = if status.is_client_error() {
        format!("refused: {why}")
    } else {
        format!("failed: {why}")
    };
    audit(session, attempt, None, &outcome, None);
    let body = format!("wharf egress proxy: {why}\n");
    let answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let io = program.io();
    if io.write_all(answer.as_bytes()).await.is_ok() {
        let _ = io.shutdown().await;
    }
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

#[cfg(test)]
mod tests;

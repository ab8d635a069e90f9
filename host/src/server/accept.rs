//! The accept loop: every connection is counted against the host's cap and its peer's
//! before hyper sees a byte, and served by hyper with a timer, so a request head that
//! does not arrive in time (or a kept-alive connection idle that long) is closed.
//! `axum::serve` sets neither: it gives hyper no timer, so no header timeout applies, and
//! it accepts without bound (SECURITY.md, "Resource ledger": connections).

use crate::config::ConnectionLimits;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// What a connection over the cap is told before it is closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: 76\r\n\r\n{\"code\":5011,\"message\":\"too many open connections; retry later\",\"data\":null}";

/// Open connections per peer address.
#[derive(Default)]
struct PeerCounts(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place under the caps; gives it back when dropped.
struct Admitted {
    _total: OwnedSemaphorePermit,
    peers: Arc<PeerCounts>,
    peer: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut counts) = self.peers.0.lock()
            && let Some(n) = counts.get_mut(&self.peer)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.peer);
            }
        }
    }
}

/// The caps connections are admitted under.
struct Gate {
    total: Arc<Semaphore>,
    peers: Arc<PeerCounts>,
    per_peer: usize,
}

impl Gate {
    fn new(limits: &ConnectionLimits) -> Self {
        Self {
            total: Arc::new(Semaphore::new(limits.max)),
            peers: Arc::default(),
            per_peer: limits.max_per_peer,
        }
    }

    fn admit(&self, peer: IpAddr) -> Option<Admitted> {
        let total = self.total.clone().try_acquire_owned().ok()?;
        let mut counts = self.peers.0.lock().ok()?;
        let n = counts.entry(peer).or_default();
        if *n >= self.per_peer {
            return None;
        }
        *n += 1;
        drop(counts);
        Some(Admitted {
            _total: total,
            peers: self.peers.clone(),
            peer,
        })
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then lets every open connection
/// finish its request in flight (hyper's graceful shutdown) and waits for them.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let gate = Gate::new(&limits);
    let header_timeout = limits.header_read_timeout();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // Out of descriptors or a connection reset before it was taken: nothing to
                // serve; pausing keeps a persistent error from spinning the loop.
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(admitted) = gate.admit(peer.ip()) else {
            tokio::spawn(refuse(tcp));
            continue;
        };
        // Without TCP_NODELAY a reply written in several small pieces (an SSE event, a
        // chunked body) waits for the client's delayed ACK: ~40 ms per call on a kept-alive
        // connection (ARCHITECTURE.md, "The path of one call").
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|request: http::Request<Incoming>| request.map(axum::body::Body::new)),
        );
        let stop = stop.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    // Every admitted connection holds one permit of the total until it ends: all of them
    // back means all connections have finished.
    let all = u32::try_from(limits.max).unwrap_or(u32::MAX);
    let _ = gate.total.acquire_many(all).await;
}

/// Tells a connection over the caps so, briefly, and closes it.
async fn refuse(mut tcp: TcpStream) {
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), async {
        let _ = tcp.write_all(REFUSED).await;
        let _ = tcp.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_counts_per_peer_and_in_all() {
        let gate = Gate::new(&ConnectionLimits {
            max: 3,
            max_per_peer: 2,
            ..ConnectionLimits::default()
        });
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = gate.admit(a).unwrap();
        let _a2 = gate.admit(a).unwrap();
        assert!(gate.admit(a).is_none(), "a third from one peer");
        let _b1 = gate.admit(b).unwrap();
        assert!(gate.admit(b).is_none(), "a fourth in all");
        drop(a1);
        assert!(gate.admit(a).is_some(), "a place given back is taken again");
    }

    #[test]
    fn the_refusal_is_a_whole_http_answer() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
}

//! Running the HTTP server: bind, serve, and on SIGTERM/Ctrl-C stop accepting, finish
//! in-flight requests, drain the backends.

use crate::Wharf;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// A server bound to its address.
pub struct BoundServer {
    listener: TcpListener,
    wharf: Arc<Wharf>,
}

impl BoundServer {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(wharf: Arc<Wharf>, addr: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
        Ok(Self { listener, wharf })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` resolves, then drains the backends.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let app = crate::api::router(self.wharf.clone());
        axum::serve(self.listener, app).with_graceful_shutdown(shutdown).await?;
        self.wharf.shutdown().await;
        Ok(())
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn termination_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: no new requests, finishing the ones in flight");
}

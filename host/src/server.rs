//! Running the HTTP server: bind, serve, and on SIGTERM/Ctrl-C stop accepting, finish
//! in-flight requests, drain the backends.

mod accept;

use crate::Wharf;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// How long in-flight requests may run after a shutdown signal.
pub const DRAIN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// A server bound to its address.
pub struct BoundServer {
    listener: TcpListener,
    preview: Option<TcpListener>,
    wharf: Arc<Wharf>,
}

impl BoundServer {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(wharf: Arc<Wharf>, addr: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let preview = match wharf.server().preview_listen {
            Some(preview_addr) => {
                let preview = TcpListener::bind(preview_addr)
                    .await
                    .with_context(|| format!("binding the preview listener {preview_addr}"))?;
                wharf.set_preview_addr(preview.local_addr()?);
                Some(preview)
            }
            None => None,
        };
        Ok(Self {
            listener,
            preview,
            wharf,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` resolves, then drains the backends.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let app = crate::api::router(self.wharf.clone())?;
        let limits = self.wharf.server().connections.clone();
        let token = self.wharf.shutdown_token().clone();
        let signalled = token.clone();
        let stop = token.clone();
        tokio::spawn(async move {
            shutdown.await;
            token.cancel();
        });
        if let Some(preview) = self.preview {
            let previews = crate::api::preview::router(self.wharf.clone())?;
            tokio::spawn(accept::serve(
                preview,
                previews,
                limits.clone(),
                stop.clone(),
            ));
        }
        let serving = accept::serve(self.listener, app, limits, stop);
        // In-flight calls get a deadline to finish; then the process goes anyway (sessions
        // are durable, so nothing is lost).
        let deadline = async move {
            signalled.cancelled().await;
            tokio::time::sleep(DRAIN_DEADLINE).await;
        };
        tokio::select! {
            () = serving => {}
            () = deadline => tracing::warn!("in-flight requests did not finish within {DRAIN_DEADLINE:?}; exiting"),
        }
        self.wharf.shutdown().await;
        crate::audit::flush(std::time::Duration::from_secs(5));
        crate::telemetry::flush(std::time::Duration::from_secs(5));
        Ok(())
    }
}

/// Refuses to serve without tokens on a non-loopback address unless `insecure`; warns when
/// serving open on loopback.
pub fn check_exposure(
    listen: SocketAddr,
    auth: &crate::config::AuthConfig,
    insecure: bool,
) -> Result<()> {
    if !auth.is_open() {
        return Ok(());
    }
    if listen.ip().is_loopback() {
        tracing::warn!(
            "no auth tokens configured: anyone on this machine can call tools (listening on {listen})"
        );
        return Ok(());
    }
    if insecure {
        tracing::warn!(
            "no auth tokens configured and listening on {listen}: anyone who can reach it can call tools (--insecure)"
        );
        return Ok(());
    }
    anyhow::bail!(
        "refusing to listen on {listen} without auth tokens: configure [[auth.tokens]], listen on 127.0.0.1, or pass --insecure"
    )
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

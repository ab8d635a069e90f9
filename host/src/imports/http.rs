//! Outbound HTTP: the standard `wasi:http/outgoing-handler`, denied by default. A request
//! goes out only when its `host:port` is granted; the name is resolved once, every address
//! is checked (loopback, private, link-local and metadata ranges need an explicit grant;
//! IPv4-mapped IPv6 counts as IPv4), and the connection goes to a checked address while TLS
//! keeps the host name for SNI. A denial is an error the guest sees, never a trap.
//!
//! Every request holds a place under two caps until its connection closes: the backend's
//! (`grants.max_http_in_flight`, all its instances together) and the calling instance's
//! (`grants.max_http_in_flight_per_call`); past either, the request fails at once with
//! `connection-limit-reached`, so a guest that fires requests without awaiting them holds
//! at most that many sockets (SECURITY.md, "Resource ledger").

use crate::policy::Grants;
use http_body_util::{BodyExt, Limited};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::rustls;
use wasmtime::component::ResourceTable;
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

/// Links outbound `wasi:http` (the handler and its types; no incoming side) for every
/// component; the store's [`WasiHttpView`] hands out the backend's [`EgressHooks`].
pub fn add_to_linker<T: WasiHttpView + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
) -> anyhow::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    Ok(())
}

/// The in-flight caps of every backend's outbound requests, by backend name (shared by
/// all the backend's instances; a reload with another cap starts a new count).
#[derive(Debug, Default)]
pub struct EgressBudgets(Mutex<HashMap<Arc<str>, Budget>>);

/// One backend's cap: its size, and the places.
type Budget = (u32, Arc<Semaphore>);

impl EgressBudgets {
    /// The shared in-flight cap of `backend`, of `limit` places.
    pub fn for_backend(&self, backend: &Arc<str>, limit: u32) -> Arc<Semaphore> {
        let fresh = || Arc::new(Semaphore::new(limit as usize));
        let Ok(mut budgets) = self.0.lock() else {
            return fresh();
        };
        match budgets.get(backend) {
            Some((cap, semaphore)) if *cap == limit => semaphore.clone(),
            _ => {
                let semaphore = fresh();
                budgets.insert(backend.clone(), (limit, semaphore.clone()));
                semaphore
            }
        }
    }
}

/// A request's places under the backend's cap and its call's.
struct InFlight {
    _backend: OwnedSemaphorePermit,
    _call: OwnedSemaphorePermit,
}

/// The egress policy of one backend's instances.
#[derive(Debug, Clone)]
pub struct EgressHooks {
    backend: Arc<str>,
    grants: Arc<Grants>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    backend_in_flight: Arc<Semaphore>,
    call_in_flight: Arc<Semaphore>,
}

impl EgressHooks {
    /// Egress for `backend` under `grants`, its requests counted against
    /// `backend_in_flight` (the backend's shared cap) and a cap of this instance's own.
    pub fn new(backend: Arc<str>, grants: Arc<Grants>, backend_in_flight: Arc<Semaphore>) -> Self {
        let per_call = grants.max_http_in_flight_per_call as usize;
        Self {
            backend,
            grants,
            metrics: None,
            backend_in_flight,
            call_in_flight: Arc::new(Semaphore::new(per_call)),
        }
    }

    /// The same policy, counting requests in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// No egress at all.
    pub fn deny_all(backend: &str) -> Self {
        Self::new(
            Arc::from(backend),
            Arc::new(Grants::default()),
            Arc::new(Semaphore::new(1)),
        )
    }

    fn take_places(&self) -> Option<InFlight> {
        Some(InFlight {
            _backend: self.backend_in_flight.clone().try_acquire_owned().ok()?,
            _call: self.call_in_flight.clone().try_acquire_owned().ok()?,
        })
    }
}

/// The `wasi:http` context of one store: wasmtime's own, and the backend's egress policy
/// (the hooks every outgoing request goes through).
pub struct HttpCtx {
    ctx: WasiHttpCtx,
    hooks: EgressHooks,
}

impl HttpCtx {
    /// Egress for `backend` under `grants`, counted in `metrics`.
    pub fn new(
        backend: Arc<str>,
        grants: Arc<Grants>,
        metrics: Arc<crate::metrics::Metrics>,
        budgets: &EgressBudgets,
    ) -> Self {
        let shared = budgets.for_backend(&backend, grants.max_http_in_flight);
        Self {
            ctx: WasiHttpCtx::new(),
            hooks: EgressHooks::new(backend, grants, shared).with_metrics(metrics),
        }
    }

    /// The view `wasi:http` works through, over the store's resource table.
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            hooks: &mut self.hooks,
            table,
        }
    }
}

type ConnFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type SendFuture =
    Box<dyn Future<Output = Result<(http::Response<WasiBody>, ConnFuture), Error>> + Send>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: ConnFuture,
    ) -> SendFuture {
        let backend = self.backend.clone();
        let grants = self.grants.clone();
        let metrics = self.metrics.clone();
        let (method, uri) = (request.method().clone(), request.uri().clone());
        // Taken now, while the guest asks, not when the request's task first runs: a guest
        // that never awaits its requests still meets the caps.
        let places = self.take_places();
        Box::new(async move {
            let started = std::time::Instant::now();
            let result = match places {
                Some(places) => send(request, options, &grants, places).await,
                None => Err(Error::ConnectionLimitReached),
            };
            let outcome = match &result {
                Ok((response, _)) => response.status().as_u16().to_string(),
                Err(e) => e.to_string(),
            };
            tracing::info!(
                target: "wharf::audit",
                event = "outbound_http",
                backend = %backend,
                %method,
                host = uri.host().unwrap_or("-"),
                path = %crate::redact::url_path(uri.path()),
                outcome,
                duration_ms = started.elapsed().as_millis() as u64,
            );
            if let Some(metrics) = &metrics {
                metrics.record_import(&backend, "http.request", result.is_ok());
            }
            result
        })
    }
}

/// Where a request goes: scheme, host (as written) and port.
pub(super) fn target(uri: &http::Uri) -> Result<(bool, String, u16), Error> {
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::HttpProtocolError),
    };
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?.to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    Ok((tls, host, port))
}

/// Resolves once and checks every address; any refused address refuses the request (a
/// name that answers with one public and one private address is treated as hostile).
async fn resolve_checked(host: &str, port: u16, grants: &Grants) -> Result<Vec<SocketAddr>, Error> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|_| Error::DnsError {
                rcode: None,
                info_code: None,
            })?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    if addrs.iter().any(|a| !grants.ip_allowed(a.ip())) {
        return Err(Error::DestinationIpProhibited);
    }
    Ok(addrs)
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::InternalError(Some(e.to_string())))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    grants: &Grants,
    places: InFlight,
) -> Result<(http::Response<WasiBody>, ConnFuture), Error> {
    let (tls, host, port) = target(request.uri())?;
    if !grants.http_host_allowed(&host, port) {
        return Err(Error::HttpRequestDenied);
    }
    if let Some(len) = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        && len > grants.max_http_request_bytes
    {
        return Err(Error::HttpRequestBodySize(Some(len)));
    }
    let limit = Duration::from_millis(grants.http_timeout_ms);
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .map_or(limit, |t| t.min(limit));
    // A long-running remote command answers late; the call's own deadline bounds the wait.
    let first_byte_timeout = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(Duration::from_secs(3600));

    let addrs = resolve_checked(&host, port, grants).await?;
    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect(&addrs[..]))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
            _ => Error::Connect(e),
        })?;
    let stream: Box<dyn Stream> = if tls {
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let name = match bare.parse::<IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(bare)
                .map_err(|_| Error::HttpRequestUriInvalid)?,
        };
        let connector = tokio_rustls::TlsConnector::from(tls_config()?);
        Box::new(
            tokio::time::timeout(connect_timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?,
        )
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(Error::from)?;
    // The places go with the connection: its socket is open until this task ends.
    tokio::spawn(async move {
        let _places = places;
        let _ = conn.await;
    });
    // The request carries scheme and authority; on the wire it is origin-form.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let max_request = grants.max_http_request_bytes as usize;
    let request = request.map(|body| {
        Limited::new(body, max_request)
            .map_err(|_| Error::HttpRequestBodySize(None))
            .boxed_unsync()
    });
    let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)?
        .map_err(Error::from)?;
    let max_response = grants.max_http_response_bytes as usize;
    let response = response.map(|body| {
        Limited::new(body, max_response)
            .map_err(|_| Error::HttpResponseBodySize(None))
            .boxed_unsync()
    });
    let done: ConnFuture = Box::new(async { Ok(()) });
    Ok((response, done))
}

//! Outbound HTTP: the standard `wasi:http/outgoing-handler`, denied by default. The guest
//! sees `HttpRequestDenied`, never a trap.

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// The egress policy of one backend: deny everything until grants exist.
#[derive(Debug, Default, Clone)]
pub struct EgressHooks {
    backend: String,
}

impl EgressHooks {
    /// Egress hooks for `backend`.
    pub fn deny_all(backend: &str) -> Self {
        Self { backend: backend.to_string() }
    }
}

type SendFuture = Box<
    dyn Future<Output = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>>
        + Send,
>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        tracing::info!(backend = %self.backend, uri = %request.uri(), "outbound HTTP denied: no host granted");
        Box::new(async { Err(Error::HttpRequestDenied) })
    }
}

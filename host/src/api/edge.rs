//! The guard in front of every route (REST, `/api/v1`, `/mcp`, `/metrics`): a web page in
//! the operator's browser must not reach the host through it.
//!
//! - On a loopback address the `Host` must be a loopback name, the listen address, or one of
//!   `[server] allowed_hosts` (a page that rebinds its own name to 127.0.0.1 sends its own
//!   name). Elsewhere any `Host` passes: the server is meant to be reached by other names.
//! - A request with an `Origin` (browsers send it cross-origin) must come from the server's
//!   own origin or one of `[server] allowed_origins`; `Origin: null` never passes.
//!
//! Refusals answer 4030 before any route (or token check) runs.

use crate::api::envelope::Envelope;
use crate::config::ServerConfig;
use crate::error_code::WharfError;
use axum::http::{HeaderMap, Request};
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tower_http::validate_request::{ValidateRequest, ValidateRequestHeaderLayer};

/// Who may reach the host, from the server settings.
#[derive(Debug, Clone)]
pub struct EdgePolicy {
    /// Host names accepted (lower case, no port); `None` accepts any.
    hosts: Option<Vec<String>>,
    /// Origins accepted besides the request's own (lower case).
    origins: Vec<String>,
}

impl EdgePolicy {
    /// The policy for `server`.
    pub fn new(server: &ServerConfig) -> Self {
        let extra = server.allowed_hosts.iter().map(|h| h.to_ascii_lowercase());
        Self {
            hosts: loopback_hosts(server.listen).map(|mut hosts| {
                hosts.extend(extra);
                hosts
            }),
            origins: server
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// 4030 unless the request's `Host` and `Origin` may reach the host.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), WharfError> {
        // Compared without case rather than lowercased: no allocation on every request.
        let host = headers
            .get(axum::http::header::HOST)
            .map(|v| v.to_str())
            .transpose()
            .map_err(|_| WharfError::forbidden("the Host header is not valid"))?;
        if let (Some(allowed), Some(host)) = (&self.hosts, host)
            && !allowed
                .iter()
                .any(|name| name.eq_ignore_ascii_case(host_name(host)))
        {
            return Err(WharfError::forbidden(format!(
                "Host `{}` is not allowed: this server listens on loopback (add the name to [server] allowed_hosts to reach it by that name)",
                host.escape_debug()
            )));
        }
        let Some(origin) = headers.get(axum::http::header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .map_err(|_| WharfError::forbidden("the Origin header is not valid"))?;
        let own = host.is_some_and(|host| {
            origin.split_once("://").is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https") && authority.eq_ignore_ascii_case(host)
            })
        });
        if own || self.origins.contains(&origin) {
            return Ok(());
        }
        Err(WharfError::forbidden(format!(
            "cross-origin request from `{}` refused (add it to [server] allowed_origins to allow it)",
            origin.escape_debug()
        )))
    }
}

/// The `Host` values accepted when the server listens on a loopback address: the loopback
/// names and the listen address itself, on any port. `None` (no check) when the server
/// listens elsewhere.
pub fn loopback_hosts(listen: SocketAddr) -> Option<Vec<String>> {
    if !listen.ip().is_loopback() {
        return None;
    }
    let own = match listen.ip() {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    };
    Some(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "[::1]".into(),
        own,
    ])
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// The edge guard: answers 4030 for a request the [`EdgePolicy`] refuses. A plain
/// synchronous check (`tower_http`'s `ValidateRequest`) rather than an `axum::middleware`
/// function, which boxes a future and clones the route behind it on every request.
#[derive(Debug, Clone)]
pub struct EdgeGuard(Arc<EdgePolicy>);

impl EdgeGuard {
    /// The layer that puts `policy` in front of every route.
    pub fn layer(policy: EdgePolicy) -> ValidateRequestHeaderLayer<Self> {
        ValidateRequestHeaderLayer::custom(Self(Arc::new(policy)))
    }
}

impl<B> ValidateRequest<B> for EdgeGuard {
    type ResponseBody = axum::body::Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response> {
        self.0.check(request.headers()).map_err(Envelope::refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert("origin", HeaderValue::from_str(o).unwrap());
        }
        h
    }

    #[test]
    fn loopback_accepts_its_own_names_and_origin_only() {
        let server = ServerConfig {
            allowed_hosts: vec!["Wharf.Local".into()],
            allowed_origins: vec!["http://localhost:6274".into()],
            ..ServerConfig::default()
        };
        let p = EdgePolicy::new(&server);
        assert!(p.check(&headers("127.0.0.1:7420", None)).is_ok());
        assert!(p.check(&headers("localhost", None)).is_ok());
        assert!(p.check(&headers("[::1]:7420", None)).is_ok());
        assert!(p.check(&headers("wharf.local:7420", None)).is_ok());
        assert!(p.check(&headers("attacker.example", None)).is_err());
        assert!(p.check(&headers("attacker.example:7420", None)).is_err());
        // Host names compare without case (RFC 9110, section 4.2.3), both ways.
        assert!(p.check(&headers("LocalHost:7420", None)).is_ok());
        assert!(p.check(&headers("WHARF.local", None)).is_ok());
        assert!(p.check(&headers("ATTACKER.example", None)).is_err());
        assert!(
            p.check(&headers("LocalHost:7420", Some("http://localhost:7420")))
                .is_ok()
        );
        assert!(
            p.check(&headers("localhost:7420", Some("http://localhost:7420")))
                .is_ok()
        );
        assert!(
            p.check(&headers("localhost:7420", Some("http://localhost:6274")))
                .is_ok()
        );
        for origin in ["http://attacker.example", "null", "http://localhost:3000"] {
            assert!(
                p.check(&headers("localhost:7420", Some(origin))).is_err(),
                "{origin}"
            );
        }
        let public = ServerConfig {
            listen: "0.0.0.0:7420".parse().unwrap(),
            ..ServerConfig::default()
        };
        let p = EdgePolicy::new(&public);
        assert!(p.check(&headers("wharf.example.com", None)).is_ok());
        assert!(
            p.check(&headers("wharf.example.com", Some("https://evil.example")))
                .is_err()
        );
    }
}

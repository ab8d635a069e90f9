//! `egress`: why outbound HTTP to a URL would be refused, in words that name the grant.
//! `wasi:http` can only say `HTTP-request-denied` or `destination-IP-prohibited`; an
//! author's HTTP helper asks here to turn that into a message an operator can act on.

use super::http::target;
use super::{HasView, HostImportsView, View, guest_error};
use crate::error_code::Code;
use crate::policy::Grants;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::egress::Host;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use std::net::{IpAddr, SocketAddr};
use wasmtime::component::Linker;

/// What one call of `egress` sees: its context, the backend's grants, and where its answer
/// is counted.
pub type EgressView<'a> = View<'a, Grants>;

/// Links `egress` for components of 0.2.0 on (0.1.0 has no `egress`).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::egress::add_to_linker::<
        T,
        HasView<Grants>,
    >(linker, HasView::view)?;
    Ok(())
}

/// Ok when `url` may be fetched under `grants` now; else 4030 naming the missing grant
/// (4000 when `url` is not an `http`/`https` URL with a host).
pub async fn check(grants: &Grants, url: &str) -> Result<(), Error> {
    let invalid = |why: &str| guest_error(Code::InvalidInput, format!("`{url}` {why}"));
    let uri: http::Uri = url.parse().map_err(|_| invalid("is not a URL"))?;
    let (_, host, port) =
        target(&uri).map_err(|_| invalid("is not an http or https URL with a host"))?;
    if !grants.http_host_allowed(&host, port) {
        return Err(guest_error(
            Code::Forbidden,
            format!(
                "outbound HTTP to `{host}:{port}` is not granted: {}",
                grants.how_to_grant("http_hosts", &format!("{host}:{port}"), &grants.http_hosts)
            ),
        ));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| {
                guest_error(
                    Code::DependencyFailure,
                    format!("`{bare}` does not resolve: {e}"),
                )
            })?
            .collect(),
    };
    match addrs.iter().find(|a| !grants.ip_allowed(a.ip())) {
        Some(refused) => Err(guest_error(
            Code::Forbidden,
            format!(
                "`{bare}` resolves to {}, a loopback, private, link-local or otherwise restricted address: {}",
                refused.ip(),
                grants.how_to_grant(
                    "http_private_cidrs",
                    &format!(
                        "{}/{}",
                        refused.ip(),
                        if refused.is_ipv4() { 32 } else { 128 }
                    ),
                    &grants.http_private_cidrs
                )
            ),
        )),
        None => Ok(()),
    }
}

impl Host for EgressView<'_> {
    async fn check(&mut self, url: String) -> wasmtime::Result<Result<(), Error>> {
        let answer = check(self.ctx, &url).await;
        self.counter.counted("egress.check", answer)
    }
}

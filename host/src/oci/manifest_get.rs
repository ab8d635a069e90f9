//! A manifest read by the host itself rather than through `oci-client`, which reads a whole
//! answer before anything can look at its size: the answer is streamed under the manifest
//! cap (a 1 GiB manifest costs at most the cap), a redirect is refused (a manifest is read
//! from the registry the reference names and nowhere else), and an error answer's body is
//! never read, so nothing a registry writes reaches a message (SECURITY.md, "Resource
//! ledger"). Authentication stays `oci-client`'s: it answers the registry's challenge and
//! hands over the bearer token.

use super::OciError;
use super::reference::OciRef;
use futures::StreamExt;
use std::time::Duration;

/// What a manifest request carries to authenticate.
pub(super) enum Credentials {
    /// Nothing.
    Anonymous,
    /// `Authorization: Bearer`.
    Bearer(String),
    /// `Authorization: Basic`.
    Basic(String, String),
}

/// The HTTP client manifests are read with: no redirects, the same connect and read
/// timeouts as the registry client.
pub(super) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .read_timeout(Duration::from_secs(60))
        .build()
        .unwrap_or_default()
}

/// `GET /v2/<repository>/manifests/<digest or tag>` of `reference`'s registry over `scheme`,
/// at most `limit` bytes.
pub(super) async fn get(
    http: &reqwest::Client,
    reference: &OciRef,
    scheme: &str,
    credentials: Credentials,
    accept: &str,
    limit: usize,
) -> Result<Vec<u8>, OciError> {
    let r = reference.client_ref();
    let at = r.digest().or(r.tag()).unwrap_or("latest");
    let ns = r
        .namespace()
        .map(|ns| format!("?ns={ns}"))
        .unwrap_or_default();
    let url = format!(
        "{scheme}://{}/v2/{}/manifests/{at}{ns}",
        r.resolve_registry(),
        r.repository()
    );
    let request = http.get(&url).header(reqwest::header::ACCEPT, accept);
    let request = match credentials {
        Credentials::Anonymous => request,
        Credentials::Bearer(token) => request.bearer_auth(token),
        Credentials::Basic(user, password) => request.basic_auth(user, Some(password)),
    };
    let unreachable = |e: reqwest::Error| {
        let kind = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "could not connect"
        } else {
            "the request failed"
        };
        OciError::Unavailable(format!("{reference}: {kind}"))
    };
    let response = request.send().await.map_err(unreachable)?;
    let status = response.status();
    if status.is_redirection() {
        return Err(OciError::Refused(format!(
            "{reference}: the registry redirected the manifest elsewhere (HTTP {}); a manifest is read only from the registry the reference names",
            status.as_u16()
        )));
    }
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(OciError::NotFound(format!(
            "{reference}: the registry has no such manifest (HTTP 404)"
        )));
    }
    if !status.is_success() {
        return Err(OciError::Unavailable(format!(
            "{reference}: the registry answered HTTP {}",
            status.as_u16()
        )));
    }
    let too_large =
        || OciError::Refused(format!("{reference}: the manifest is over {limit} bytes"));
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(unreachable)?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

//! Signed preview URLs, as Daytona's signed previews: an HMAC-SHA256, with the host's
//! preview key, over a session, a port, an expiry and the session's preview epoch. Rotating
//! the epoch (`DELETE /v1/sessions/{id}/previews`) revokes every URL signed before. Also
//! where a preview request says which session and port it wants: its `Host`
//! (`{port}-{session}.{domain}`) or, without a preview domain, its path
//! (`/{session}/{port}/...`). Pure: no store, no clock.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key-value owner of the host's preview rows (the key, each session's epoch); not a
/// backend name (those have no `:`).
pub const PREVIEW_KV_OWNER: &str = "wharf:previews";
/// The key of the host's preview key.
pub const PREVIEW_KEY: &str = "preview-key";
/// The key of a session's preview epoch.
pub const PREVIEW_EPOCH: &str = "preview-epoch";
/// The query parameter carrying a signed URL's expiry (Unix seconds).
pub const EXPIRES_PARAM: &str = "wharf_preview_expires";
/// The query parameter carrying a signed URL's signature.
pub const SIGNATURE_PARAM: &str = "wharf_preview_signature";
/// The longest a signed URL may live.
pub const MAX_TTL_SECONDS: u64 = 7 * 24 * 3600;

/// A signed preview URL.
#[derive(Debug, Clone)]
pub struct PreviewLink {
    /// The URL, its signature in the query.
    pub url: String,
    /// When it stops working, Unix seconds.
    pub expires_at_s: u64,
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], session: &str, port: u16, expires_at_s: u64, epoch: u64) -> HmacSha256 {
    // `new_from_slice` takes keys of any length for HMAC.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => HmacSha256::new(&Default::default()),
    };
    mac.update(format!("wharf-preview\n{session}\n{port}\n{expires_at_s}\n{epoch}").as_bytes());
    mac
}

/// The signature of a URL for `session`'s `port` until `expires_at_s`, at `epoch`.
pub fn sign(key: &[u8], session: &str, port: u16, expires_at_s: u64, epoch: u64) -> String {
    hex::encode(
        mac(key, session, port, expires_at_s, epoch)
            .finalize()
            .into_bytes(),
    )
}

/// Why a signed URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    /// Its time is over.
    #[error("the preview URL expired")]
    Expired,
    /// The signature is not this session's, port's and expiry's (tampered, or revoked).
    #[error("the preview URL's signature does not match (tampered with, or revoked)")]
    Mismatch,
}

/// Checks a signed URL's `signature` (hex) at `now_s`, in constant time.
pub fn verify(
    key: &[u8],
    target: (&str, u16),
    expires_at_s: u64,
    epoch: u64,
    signature: &str,
    now_s: u64,
) -> Result<(), SignatureRefusal> {
    if expires_at_s <= now_s {
        return Err(SignatureRefusal::Expired);
    }
    let given = hex::decode(signature).map_err(|_| SignatureRefusal::Mismatch)?;
    mac(key, target.0, target.1, expires_at_s, epoch)
        .verify_slice(&given)
        .map_err(|_| SignatureRefusal::Mismatch)
}

/// The host label of a session's port under a preview domain: `{port}-{session}`, the
/// session id's `_` written `-` (a host name has no `_`).
pub fn host_label(session: &str, port: u16) -> String {
    format!("{port}-{}", session.replace('_', "-"))
}

/// The session and port a preview `host` names under `domain` (`{port}-{session}.{domain}`,
/// any `:port` after it ignored); `None` for any other host.
pub fn parse_host(host: &str, domain: &str) -> Option<(String, u16)> {
    let host = host.rsplit_once(':').map_or(host, |(name, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            name
        } else {
            host
        }
    });
    let label = host
        .to_ascii_lowercase()
        .strip_suffix(&format!(".{}", domain.to_ascii_lowercase()))?
        .to_string();
    if label.contains('.') {
        return None;
    }
    let (port, session) = label.split_once('-')?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    Some((session_from_label(session)?, port))
}

/// The session and port a preview path names without a domain (`/{session}/{port}/rest`),
/// and the rest of the path (with its leading `/`).
pub fn parse_path(path: &str) -> Option<(String, u16, String)> {
    let mut parts = path.strip_prefix('/')?.splitn(3, '/');
    let session = parts.next()?.to_string();
    let port: u16 = parts.next()?.parse().ok().filter(|p| *p > 0)?;
    let rest = format!("/{}", parts.next().unwrap_or(""));
    check_session(&session).then_some((session, port, rest))
}

fn session_from_label(label: &str) -> Option<String> {
    let session = match label.strip_prefix("ses-") {
        Some(rest) => format!("ses_{rest}"),
        None => label.to_string(),
    };
    check_session(&session).then_some(session)
}

/// A session id as a preview may name it: 1–128 of `A-Z a-z 0-9 _ -`.
fn check_session(session: &str) -> bool {
    !session.is_empty()
        && session.len() <= 128
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_for_its_session_port_expiry_and_epoch_only() {
        let key = b"k".repeat(32);
        let sig = sign(&key, "ses_a", 8080, 1000, 0);
        assert_eq!(verify(&key, ("ses_a", 8080), 1000, 0, &sig, 999), Ok(()));
        let mismatch = Err(SignatureRefusal::Mismatch);
        assert_eq!(verify(&key, ("ses_b", 8080), 1000, 0, &sig, 999), mismatch);
        assert_eq!(verify(&key, ("ses_a", 8081), 1000, 0, &sig, 999), mismatch);
        assert_eq!(verify(&key, ("ses_a", 8080), 1001, 0, &sig, 999), mismatch);
        assert_eq!(verify(&key, ("ses_a", 8080), 1000, 1, &sig, 999), mismatch);
        assert_eq!(
            verify(b"other", ("ses_a", 8080), 1000, 0, &sig, 999),
            mismatch
        );
        assert_eq!(verify(&key, ("ses_a", 8080), 1000, 0, "zz", 999), mismatch);
        assert_eq!(
            verify(&key, ("ses_a", 8080), 1000, 0, &sig, 1000),
            Err(SignatureRefusal::Expired)
        );
    }

    #[test]
    fn hosts_and_paths_name_a_session_and_a_port() {
        let label = host_label("ses_0a1b", 3000);
        assert_eq!(label, "3000-ses-0a1b");
        assert_eq!(
            parse_host(&format!("{label}.preview.test:7421"), "preview.test"),
            Some(("ses_0a1b".into(), 3000))
        );
        assert_eq!(
            parse_host("3000-SES-0A1B.Preview.Test", "preview.test"),
            Some(("ses_0a1b".into(), 3000))
        );
        for bad in [
            "preview.test",
            "3000-ses-a.other.test",
            "x.3000-ses-a.preview.test",
            "0-ses-a.preview.test",
            "99999-ses-a.preview.test",
            "3000.preview.test",
            "3000-ses-a/b.preview.test",
        ] {
            assert_eq!(parse_host(bad, "preview.test"), None, "{bad}");
        }
        assert_eq!(
            parse_path("/ses_a/8080/static/app.js"),
            Some(("ses_a".into(), 8080, "/static/app.js".into()))
        );
        assert_eq!(
            parse_path("/ses_a/8080"),
            Some(("ses_a".into(), 8080, "/".into()))
        );
        for bad in ["/", "/ses_a", "/ses_a/http", "/../8080/x", "/ses a/8080/"] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }
}

//! `oci://registry/repository:tag` and `oci://registry/repository@sha256:HEX`: parsed
//! strictly (the registry must be written out, no Docker Hub default) because a reference
//! comes from config and sidecars an operator or a dropped file controls.

use super::OciError;
use crate::config::OCI_PREFIX;
use oci_client::Reference;

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    inner: Reference,
}

/// Longest reference accepted.
const MAX_REFERENCE_LEN: usize = 1024;

impl OciRef {
    /// Parses `oci://registry/repository(:tag|@sha256:HEX)` (the `oci://` is optional).
    pub fn parse(text: &str) -> Result<Self, OciError> {
        let bare = text.strip_prefix(OCI_PREFIX).unwrap_or(text);
        let refuse = |why: &str| {
            OciError::Refused(format!(
                "`{}` is not an OCI reference: {why} (write oci://registry/repository:tag or @sha256:HEX)",
                text.escape_debug()
            ))
        };
        if bare.len() > MAX_REFERENCE_LEN {
            return Err(refuse("too long"));
        }
        let Some((registry, rest)) = bare.split_once('/') else {
            return Err(refuse("no registry"));
        };
        let looks_like_registry = registry.contains('.')
            || registry.contains(':')
            || registry == "localhost"
            || registry.starts_with('[');
        if !looks_like_registry || rest.is_empty() {
            return Err(refuse(
                "the registry must be written out (host[:port]/repository)",
            ));
        }
        let inner: Reference = bare.parse().map_err(|e| refuse(&format!("{e}")))?;
        if inner.registry() != registry {
            return Err(refuse(
                "the registry must be written out (host[:port]/repository)",
            ));
        }
        if let Some(digest) = inner.digest()
            && !super::cache::is_sha256_digest(digest)
        {
            return Err(refuse("only sha256 digests are accepted"));
        }
        if inner.digest().is_none() && inner.tag().is_none() {
            return Err(refuse("name a tag or a digest"));
        }
        Ok(Self { inner })
    }

    /// The same repository at `digest`.
    pub fn at_digest(&self, digest: &str) -> Self {
        self.in_repository(digest, Reference::with_digest)
    }

    /// The same repository at `tag`.
    pub fn at_tag(&self, tag: &str) -> Self {
        self.in_repository(tag, Reference::with_tag)
    }

    fn in_repository(&self, at: &str, make: fn(String, String, String) -> Reference) -> Self {
        Self {
            inner: make(
                self.registry().to_string(),
                self.repository().to_string(),
                at.to_string(),
            ),
        }
    }

    /// `host[:port]`.
    pub fn registry(&self) -> &str {
        self.inner.registry()
    }

    /// The repository path.
    pub fn repository(&self) -> &str {
        self.inner.repository()
    }

    /// The pinned digest, if the reference names one.
    pub fn digest(&self) -> Option<&str> {
        self.inner.digest()
    }

    /// The tag, if the reference names one.
    pub fn tag(&self) -> Option<&str> {
        self.inner.tag()
    }

    /// `registry/repository`, as a cosign payload names it.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry(), self.repository())
    }

    /// The client's own reference type.
    pub(super) fn client_ref(&self) -> &Reference {
        &self.inner
    }

    /// Whether the registry is on this machine (spoken to over plain HTTP).
    pub fn is_loopback(&self) -> bool {
        let registry = self.registry();
        let host = match registry.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(""),
            None => registry.split(':').next().unwrap_or(""),
        };
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{OCI_PREFIX}{}", self.inner.whole())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_registry_and_a_tag_or_digest() {
        let r = OciRef::parse("oci://localhost:5000/acme/echo:1.2.0").unwrap();
        assert_eq!(r.registry(), "localhost:5000");
        assert_eq!(r.repository(), "acme/echo");
        assert_eq!(r.tag(), Some("1.2.0"));
        assert!(r.is_loopback());
        let d = format!("sha256:{}", "a".repeat(64));
        let r = OciRef::parse(&format!("oci://ghcr.io/acme/echo@{d}")).unwrap();
        assert_eq!(r.digest(), Some(d.as_str()));
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), format!("oci://ghcr.io/acme/echo@{d}"));
    }

    #[test]
    fn hostile_references_are_refused() {
        for bad in [
            "oci://echo:1",
            "oci://library/echo:1",
            "oci://localhost:5000/",
            "oci://localhost:5000/Echo:1",
            "oci://localhost:5000/echo@sha256:abc",
            "oci://localhost:5000/echo@md5:0123456789abcdef0123456789abcdef",
            "oci://localhost:5000/echo:../../etc",
        ] {
            assert!(OciRef::parse(bad).is_err(), "{bad} accepted");
        }
        assert!(OciRef::parse(&format!("oci://a.b/{}:1", "x".repeat(2000))).is_err());
    }
}

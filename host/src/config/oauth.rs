//! `[auth.oauth]`: Wharf as an OAuth 2.1 resource server. Bearer JWTs (RFC 9068) issued by
//! the named authorization servers are accepted beside the static tokens; their claims name
//! the tenant, the scopes and the allowlists.

use anyhow::{Result, bail};
use serde::Deserialize;
use url::Url;

/// How Wharf accepts access tokens from authorization servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// This server's public URL as clients reach it (behind any proxy): the audience a
    /// token must name (RFC 8707) and the `resource` of the protected-resource metadata
    /// (RFC 9728), e.g. `https://wharf.example.com`.
    pub resource: String,
    /// The authorization servers' issuer identifiers (RFC 8414), exactly as their
    /// metadata's `issuer` and their tokens' `iss` spell them. Their keys are found by
    /// discovery: `/.well-known/oauth-authorization-server`, then OpenID's
    /// `/.well-known/openid-configuration`.
    pub authorization_servers: Vec<String>,
    /// The claim whose string value is the caller's tenant (default `sub`).
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    /// Which OAuth scope grants which Wharf scope.
    #[serde(default)]
    pub scopes: OAuthScopes,
    /// A claim listing the backends the caller may use (an array of names). When set, a
    /// token without the claim may use none; when unset, every backend.
    #[serde(default)]
    pub backends_claim: Option<String>,
    /// A claim listing the `backend:action` tools the caller may use, as `backends_claim`.
    #[serde(default)]
    pub tools_claim: Option<String>,
    /// Tolerated clock difference for `exp` and `nbf`, in seconds (default 60, at most 300).
    #[serde(default = "default_clock_skew")]
    pub clock_skew_seconds: u64,
    /// Refuse tokens whose header lacks `typ: at+jwt` (RFC 9068 §4; an ID token is not an
    /// access token). Default true; some servers (older Keycloak, Auth0's default) omit it.
    #[serde(default = "default_true")]
    pub require_access_token_type: bool,
    /// The least time between two key fetches from one authorization server, in seconds
    /// (default 30): a token naming an unknown key fetches the keys again at most this
    /// often, so unknown `kid`s cannot make Wharf hammer the server.
    #[serde(default = "default_refresh")]
    pub key_refresh_seconds: u64,
    /// Keys older than this are fetched again on the next token that needs them, in seconds
    /// (default 3600), so a key the server withdrew stops being trusted.
    #[serde(default = "default_key_age")]
    pub key_max_age_seconds: u64,
    /// Verified tokens kept (default 4096): a token seen again before it expires costs a
    /// map lookup, not a signature check.
    #[serde(default = "default_cache")]
    pub verified_tokens_cached: usize,
}

/// The OAuth scope names that grant Wharf's scopes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthScopes {
    /// Grants `read` (default `wharf:read`).
    #[serde(default = "default_read")]
    pub read: String,
    /// Grants `call` (default `wharf:call`).
    #[serde(default = "default_call")]
    pub call: String,
    /// Grants `admin`; none unless set, so no token from an authorization server is an
    /// admin by default.
    #[serde(default)]
    pub admin: Option<String>,
}

impl Default for OAuthScopes {
    fn default() -> Self {
        Self {
            read: default_read(),
            call: default_call(),
            admin: None,
        }
    }
}

impl OAuthScopes {
    /// The scopes a client may ask for (the metadata's `scopes_supported`).
    pub fn supported(&self) -> Vec<&str> {
        let mut all = vec![self.read.as_str(), self.call.as_str()];
        all.extend(self.admin.as_deref());
        all
    }
}

/// Longest token Wharf reads, in bytes; a longer one is refused before any parsing.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
const MAX_CLOCK_SKEW: u64 = 300;
const MAX_CACHED: usize = 100_000;

fn default_tenant_claim() -> String {
    "sub".into()
}
fn default_read() -> String {
    "wharf:read".into()
}
fn default_call() -> String {
    "wharf:call".into()
}
fn default_clock_skew() -> u64 {
    60
}
fn default_true() -> bool {
    true
}
fn default_refresh() -> u64 {
    30
}
fn default_key_age() -> u64 {
    3600
}
fn default_cache() -> usize {
    4096
}

/// Whether `url` may name an authorization server or its keys: https, or plain http on a
/// loopback host.
pub fn is_secure_or_loopback(url: &Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    url.scheme() == "https" || url.scheme() == "http" && loopback
}

fn check_url(key: &str, text: &str) -> Result<Url> {
    let url = Url::parse(text).map_err(|e| anyhow::anyhow!("auth.oauth.{key} = `{text}`: {e}"))?;
    if !is_secure_or_loopback(&url) {
        bail!("auth.oauth.{key} = `{url}`: use https (plain http only on a loopback host)");
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        bail!("auth.oauth.{key} = `{url}`: no query, fragment or credentials");
    }
    Ok(url)
}

impl OAuthConfig {
    /// Checks URLs (https, or http on loopback), claim names and bounds.
    pub fn validate(&self) -> Result<()> {
        check_url("resource", &self.resource)?;
        if self.authorization_servers.is_empty() {
            bail!("auth.oauth.authorization_servers is empty: name the issuer(s) to trust");
        }
        for issuer in &self.authorization_servers {
            check_url("authorization_servers", issuer)?;
        }
        let claims = [
            Some(&self.tenant_claim),
            self.backends_claim.as_ref(),
            self.tools_claim.as_ref(),
        ];
        if claims.into_iter().flatten().any(|c| c.trim().is_empty()) {
            bail!("auth.oauth: a claim name is empty");
        }
        let scopes = self.scopes.supported();
        if scopes
            .iter()
            .any(|s| s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"'))
        {
            bail!("auth.oauth.scopes: a scope is empty or holds a space or a quote");
        }
        if self.clock_skew_seconds > MAX_CLOCK_SKEW {
            bail!("auth.oauth.clock_skew_seconds must be at most {MAX_CLOCK_SKEW}");
        }
        if self.key_refresh_seconds == 0 || self.key_refresh_seconds > self.key_max_age_seconds {
            bail!(
                "auth.oauth.key_refresh_seconds must be at least 1 and at most key_max_age_seconds"
            );
        }
        if self.verified_tokens_cached > MAX_CACHED {
            bail!("auth.oauth.verified_tokens_cached must be at most {MAX_CACHED}");
        }
        Ok(())
    }

    /// Where this resource's metadata is served (RFC 9728 §3.1): the resource's origin and
    /// the last of [`Self::metadata_paths`].
    pub fn metadata_url(&self) -> String {
        let path = self.metadata_paths().pop().unwrap_or_default();
        match Url::parse(&self.resource) {
            Ok(url) => format!("{}{path}", url.origin().ascii_serialization()),
            Err(_) => self.resource.clone(),
        }
    }

    /// The paths the metadata is served at: the well-known path, and under it the
    /// resource's own path when it has one (RFC 9728 §3.1; clients try that first).
    pub fn metadata_paths(&self) -> Vec<String> {
        let root = "/.well-known/oauth-protected-resource".to_string();
        let own = Url::parse(&self.resource)
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        if own.is_empty() {
            vec![root]
        } else {
            vec![root.clone(), format!("{root}{own}")]
        }
    }

    /// The audiences a token may name: the resource as configured, with and without a
    /// trailing slash (clients normalise `https://h` to `https://h/`; both name it).
    pub fn audiences(&self) -> [String; 2] {
        let bare = self.resource.trim_end_matches('/');
        [bare.to_string(), format!("{bare}/")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OAuthConfig> {
        let config: OAuthConfig = toml::from_str(text)?;
        config.validate().map(|()| config)
    }

    #[test]
    fn urls_are_https_or_loopback() {
        let ok = parse(
            "resource = \"http://127.0.0.1:8080\"\nauthorization_servers = [\"http://localhost:9000\"]",
        )
        .unwrap();
        assert_eq!(
            ok.metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        assert_eq!(ok.scopes.supported(), ["wharf:read", "wharf:call"]);
        let err = parse(
            "resource = \"http://wharf.example.com\"\nauthorization_servers = [\"https://as.example.com\"]",
        )
        .unwrap_err();
        assert!(err.to_string().contains("use https"), "{err}");
        assert!(
            parse("resource = \"https://w.example\"\nauthorization_servers = []")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
    }

    #[test]
    fn a_resource_with_a_path_has_its_metadata_under_it() {
        let c = parse(
            "resource = \"https://w.example/mcp\"\nauthorization_servers = [\"https://as.example\"]",
        )
        .unwrap();
        assert_eq!(
            c.metadata_url(),
            "https://w.example/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn bounds_and_scope_names_are_checked() {
        let base =
            "resource = \"https://w.example\"\nauthorization_servers = [\"https://as.example\"]\n";
        for bad in [
            "clock_skew_seconds = 100000",
            "key_refresh_seconds = 0",
            "verified_tokens_cached = 100000000",
            "tenant_claim = \" \"",
            "[scopes]\nread = \"a b\"",
        ] {
            assert!(parse(&format!("{base}{bad}")).is_err(), "{bad}");
        }
    }
}

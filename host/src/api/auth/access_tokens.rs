//! Bearer JWTs from the configured authorization servers (RFC 9068 access tokens):
//! signature by a key the issuer publishes (asymmetric algorithms only; the header's own
//! `jwk`/`jku` are never used), `typ: at+jwt`, issuer, audience = this resource (RFC
//! 8707), expiry and not-before within the configured clock skew; then the claims name the
//! caller. A verified token is cached until it expires.

use super::Caller;
use super::issuer_keys::{FETCH_TIMEOUT, IssuerKeys, KeyError};
use super::token_claims::caller_from_claims;
use super::verified_tokens::VerifiedTokens;
use crate::config::{MAX_TOKEN_BYTES, OAuthConfig};
use crate::error_code::{Code, WharfError};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{AlgorithmFamily, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// Verifies access tokens against the configured authorization servers.
pub struct AccessTokens {
    config: OAuthConfig,
    static_tenants: BTreeSet<String>,
    issuers: Vec<IssuerKeys>,
    verified: VerifiedTokens,
}

#[derive(Deserialize)]
struct IssuerOnly {
    iss: Option<String>,
}

fn invalid(message: impl Into<String>) -> WharfError {
    WharfError::new(Code::Unauthorized, message)
}

impl AccessTokens {
    /// A verifier for `config`; `static_tenants` are the static tokens' names, which no
    /// token from a server may claim.
    pub fn new(config: &OAuthConfig, static_tenants: BTreeSet<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let issuers = config
            .authorization_servers
            .iter()
            .map(|issuer| {
                IssuerKeys::new(
                    issuer.clone(),
                    http.clone(),
                    Duration::from_secs(config.key_refresh_seconds),
                    Duration::from_secs(config.key_max_age_seconds),
                )
            })
            .collect();
        Ok(Self {
            config: config.clone(),
            static_tenants,
            issuers,
            verified: VerifiedTokens::new(config.verified_tokens_cached),
        })
    }

    /// Whether `token` has a JWS compact serialisation's shape (three dot-separated parts)
    /// and is short enough to read.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.len() <= MAX_TOKEN_BYTES && token.bytes().filter(|b| *b == b'.').count() == 2
    }

    /// The caller `token` names, or 4010 saying why it names none (5012 when the issuer's
    /// keys cannot be fetched and none are held).
    pub async fn verify(&self, token: &str) -> Result<Caller, WharfError> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(caller) = self.verified.get(token, now) {
            return Ok(caller);
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(format!(
                "the token is over {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("the token is not a signed JWT with an algorithm Wharf knows"))?;
        if header.alg.family() == AlgorithmFamily::Hmac {
            return Err(invalid(
                "the token is signed with a shared secret (HS*): only an authorization server's public keys are trusted",
            ));
        }
        if self.config.require_access_token_type
            && !header.typ.as_deref().is_some_and(|t| {
                t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("application/at+jwt")
            })
        {
            return Err(invalid(
                "the token is not an access token (RFC 9068: its header's typ must be at+jwt)",
            ));
        }
        let issuer = self.issuer_of(token)?;
        let key = issuer
            .key_for(header.kid.as_deref(), header.alg)
            .await
            .map_err(|e| match e {
                KeyError::Unknown => invalid(
                    "the token is signed by a key its authorization server does not publish",
                ),
                KeyError::Unavailable(why) => WharfError::new(
                    Code::DependencyFailure,
                    format!("the authorization server's keys could not be fetched: {why}"),
                ),
            })?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.clock_skew_seconds;
        validation.validate_nbf = true;
        validation.set_audience(&self.config.audiences());
        validation.set_issuer(&[issuer.issuer()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| invalid(refusal(e.kind())))?;
        let caller = caller_from_claims(&self.config, &self.static_tenants, &data.claims)
            .map_err(invalid)?;
        if let Some(exp) = data.claims.get("exp").and_then(Value::as_u64) {
            let until = exp.saturating_add(self.config.clock_skew_seconds);
            self.verified.insert(token, caller.clone(), until, now);
        }
        Ok(caller)
    }

    /// The configured server whose keys verify `token`: the only one, or the one its
    /// (not yet verified) `iss` names; verification then checks `iss` again.
    fn issuer_of(&self, token: &str) -> Result<&IssuerKeys, WharfError> {
        if let [only] = self.issuers.as_slice() {
            return Ok(only);
        }
        let claimed = jsonwebtoken::dangerous::insecure_decode_claims::<IssuerOnly>(token)
            .ok()
            .and_then(|c| c.iss);
        self.issuers
            .iter()
            .find(|i| claimed.as_deref() == Some(i.issuer()))
            .ok_or_else(|| {
                invalid("the token's issuer is not an authorization server this host trusts")
            })
    }
}

/// Why a token failed validation, in the client's words (never the key or the claims).
fn refusal(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => {
            "the token is for another audience: its `aud` must name this resource (RFC 8707)".into()
        }
        ErrorKind::InvalidIssuer => "the token's issuer is not the one whose key signed it".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        _ => "the token is not valid".into(),
    }
}

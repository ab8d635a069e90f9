//! One authorization server's signing keys: its `jwks_uri` found by discovery (RFC 8414
//! metadata, then OpenID's), the key set fetched and held, and fetched again when a token
//! names a key not held (at most once per `key_refresh_seconds`, one fetch at a time) or
//! when the set is older than `key_max_age_seconds`. What the server sends is bounded
//! (size, time, no redirects) and checked (the metadata's `issuer`, https or loopback).

use crate::config::is_secure_or_loopback;
use anyhow::{Context, Result, bail};
use jsonwebtoken::jwk::{Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use url::Url;

/// Largest metadata or key-set document read, bytes.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most keys held per server; the rest of a larger set is ignored.
const MAX_KEYS: usize = 64;
/// How long one fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Why no key could be found for a token.
#[derive(Debug)]
pub enum KeyError {
    /// The server publishes no key with this `kid` (and algorithm).
    Unknown,
    /// The keys could not be fetched and none are held.
    Unavailable(String),
}

struct HeldKey {
    kid: Option<String>,
    family: AlgorithmFamily,
    alg: Option<Algorithm>,
    key: DecodingKey,
}

#[derive(Default)]
struct KeySet {
    keys: Vec<HeldKey>,
    jwks_uri: Option<Url>,
    fetched: Option<Instant>,
}

impl KeySet {
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&HeldKey> {
        let fits = |k: &&HeldKey| k.family == alg.family() && k.alg.is_none_or(|a| a == alg);
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid)),
            // No `kid`: only unambiguous when one key fits.
            None => {
                let mut fitting = self.keys.iter().filter(fits);
                let first = fitting.next();
                first.filter(|_| fitting.next().is_none())
            }
        }
    }
}

/// An authorization server's keys, fetched on demand.
pub struct IssuerKeys {
    issuer: String,
    http: reqwest::Client,
    refresh_every: Duration,
    max_age: Duration,
    held: RwLock<Arc<KeySet>>,
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    jwks_uri: Option<String>,
}

impl IssuerKeys {
    /// Keys of `issuer`, none fetched yet.
    pub fn new(
        issuer: String,
        http: reqwest::Client,
        refresh_every: Duration,
        max_age: Duration,
    ) -> Self {
        Self {
            issuer,
            http,
            refresh_every,
            max_age,
            held: RwLock::new(Arc::new(KeySet::default())),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The issuer identifier these keys belong to.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    fn current(&self) -> Arc<KeySet> {
        match self.held.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The key that verifies a token with header `kid` and `alg`.
    pub async fn key_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, KeyError> {
        let set = self.current();
        let stale = set.fetched.is_none_or(|t| t.elapsed() >= self.max_age);
        let set = if stale { self.refresh().await? } else { set };
        if let Some(key) = set.find(kid, alg) {
            return Ok(key.key.clone());
        }
        // A key not held: perhaps rotated in since the last fetch.
        let set = self.refresh().await?;
        set.find(kid, alg)
            .map(|k| k.key.clone())
            .ok_or(KeyError::Unknown)
    }

    /// Fetches the key set unless another fetch finished less than `refresh_every` ago;
    /// on failure keeps what is held (and says so in the log), failing only with nothing.
    async fn refresh(&self) -> Result<Arc<KeySet>, KeyError> {
        let _one_at_a_time = self.fetching.lock().await;
        let held = self.current();
        if held
            .fetched
            .is_some_and(|t| t.elapsed() < self.refresh_every)
        {
            return Ok(held);
        }
        match self.fetch(held.jwks_uri.clone()).await {
            Ok(set) => {
                let set = Arc::new(set);
                match self.held.write() {
                    Ok(mut w) => *w = set.clone(),
                    Err(poisoned) => *poisoned.into_inner() = set.clone(),
                }
                Ok(set)
            }
            Err(e) => {
                let why = format!("{e:#}");
                tracing::warn!(issuer = %self.issuer, "fetching the authorization server's keys failed: {why}");
                if held.keys.is_empty() {
                    Err(KeyError::Unavailable(why))
                } else {
                    Ok(held)
                }
            }
        }
    }

    async fn fetch(&self, jwks_uri: Option<Url>) -> Result<KeySet> {
        let jwks_uri = match jwks_uri {
            Some(uri) => uri,
            None => self.discover().await?,
        };
        // Each key on its own: one key of a type this build does not know must not hide
        // the others.
        let set: RawKeySet = self.get_json(&jwks_uri).await?;
        let keys: Vec<HeldKey> = set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .filter(|k| {
                k.common
                    .public_key_use
                    .as_ref()
                    .is_none_or(|u| *u == PublicKeyUse::Signature)
            })
            .filter_map(|k| held_key(&k))
            .take(MAX_KEYS)
            .collect();
        if keys.is_empty() {
            bail!("{jwks_uri} holds no usable signing key");
        }
        Ok(KeySet {
            keys,
            jwks_uri: Some(jwks_uri),
            fetched: Some(Instant::now()),
        })
    }

    /// The `jwks_uri` of the server's metadata, RFC 8414's well-known URL first.
    async fn discover(&self) -> Result<Url> {
        let issuer = Url::parse(&self.issuer).context("the issuer is not a URL")?;
        let path = issuer.path().trim_end_matches('/');
        let mut rfc8414 = issuer.clone();
        rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
        let mut openid = issuer.clone();
        openid.set_path(&format!("{path}/.well-known/openid-configuration"));
        let mut failures = Vec::new();
        for url in [rfc8414, openid] {
            match self.get_json::<ServerMetadata>(&url).await {
                Ok(meta) => {
                    // RFC 8414 §3.3: metadata naming another issuer is not this server's.
                    if meta.issuer != self.issuer {
                        bail!(
                            "{url} names issuer `{}`, not `{}`",
                            meta.issuer,
                            self.issuer
                        );
                    }
                    let uri = meta.jwks_uri.context("the metadata has no jwks_uri")?;
                    let uri = Url::parse(&uri).with_context(|| format!("jwks_uri `{uri}`"))?;
                    if !is_secure_or_loopback(&uri) {
                        bail!("jwks_uri `{uri}` is not https");
                    }
                    return Ok(uri);
                }
                Err(e) => failures.push(format!("{url}: {e:#}")),
            }
        }
        bail!("no authorization server metadata: {}", failures.join("; "))
    }

    async fn get_json<T: DeserializeOwned>(&self, url: &Url) -> Result<T> {
        let mut response = self
            .http
            .get(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("answered {}", response.status());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                bail!("the document is over {MAX_DOCUMENT_BYTES} bytes");
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).context("not the JSON document expected")
    }
}

/// A key Wharf can verify with: asymmetric only (a symmetric key in a public set is a
/// mistake, and `alg: HS256` with a public key as its secret is the classic confusion).
fn held_key(jwk: &Jwk) -> Option<HeldKey> {
    let key = DecodingKey::from_jwk(jwk).ok()?;
    let family = key.family();
    if family == AlgorithmFamily::Hmac {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(a) => Some(algorithm_of(a)?),
        None => None,
    };
    Some(HeldKey {
        kid: jwk.common.key_id.clone(),
        family,
        alg,
        key,
    })
}

fn algorithm_of(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

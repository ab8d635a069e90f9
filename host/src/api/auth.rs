//! Who is calling. Static bearer tokens with scopes (`[[auth.tokens]]`), and with
//! `[auth.oauth]` access tokens from authorization servers (`access_tokens`). A token is a
//! tenant: sessions are keyed by (tenant, backend, key), and another token sees 4007 as if
//! a session did not exist. With no credential configured every caller is the anonymous
//! tenant with `read` and `call` (the server refuses to start that way on a non-loopback
//! address unless `--insecure`); admin routes exist only when an admin can exist.
//!
//! One middleware ([`authenticate_request`]) authenticates every request once and puts the
//! [`Caller`] (or the refusal) into its extensions; handlers, the scope guard and MCP read
//! it from there, and every 401 leaves with a `WWW-Authenticate` challenge.

mod access_tokens;
mod challenge;
mod issuer_keys;
mod token_claims;
mod verified_tokens;

pub use challenge::resource_metadata;

use crate::api::envelope::{Envelope, Meta};
use crate::config::{AuthConfig, TokenScope};
use crate::error_code::{Code, WharfError};
use crate::front_door::{ANONYMOUS_TENANT, Wharf};
use crate::principal::Principal;
use crate::tenant::Tenant;
use access_tokens::AccessTokens;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tower_http::validate_request::{ValidateRequest, ValidateRequestHeaderLayer};

/// Who is calling: a [`Principal`] (tenant, view, allowlists) and the token's scopes.
#[derive(Debug, Clone)]
pub struct Caller {
    principal: Principal,
    scopes: Vec<TokenScope>,
}

impl std::ops::Deref for Caller {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.principal
    }
}

impl Caller {
    /// The caller when no token is configured.
    pub fn anonymous() -> Self {
        Self {
            principal: Principal::unrestricted(ANONYMOUS_TENANT),
            scopes: vec![TokenScope::Read, TokenScope::Call],
        }
    }

    /// Who the caller is to the front door.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether the caller has `scope` (admin implies the others).
    pub fn has(&self, scope: TokenScope) -> bool {
        self.scopes.contains(&scope) || self.scopes.contains(&TokenScope::Admin)
    }

    /// 4030 unless the caller has `scope`.
    pub fn require(&self, scope: TokenScope) -> Result<(), WharfError> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(WharfError::forbidden(format!(
                "token `{}` lacks the `{}` scope",
                self.name,
                scope.as_str()
            )))
        }
    }
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// The bearer token of an `Authorization` header value.
fn bearer(header: Option<&str>) -> Result<&str, WharfError> {
    header
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| {
            WharfError::new(
                Code::Unauthorized,
                "a bearer token is required (Authorization: Bearer …)",
            )
        })
}

/// The static token `presented` is, as a caller.
fn static_caller(auth: &AuthConfig, presented: &str) -> Option<Caller> {
    // Compare digests so the comparison time does not depend on the secret's bytes.
    let presented = digest(presented);
    auth.tokens
        .iter()
        .find(|t| t.resolved_value().is_some_and(|v| digest(&v) == presented))
        .map(|t| Caller {
            principal: Principal {
                name: t.name.clone(),
                tenant: t.name.clone(),
                view: if t.scopes.contains(&TokenScope::Admin) {
                    Tenant::Every
                } else {
                    Tenant::own(t.name.clone())
                },
                backends: t.backends.clone(),
                tools: t.tools.clone(),
            },
            scopes: t.scopes.clone(),
        })
}

/// Authenticates requests under one `[auth]` configuration.
pub struct Authenticator {
    auth: AuthConfig,
    access_tokens: Option<AccessTokens>,
}

/// Why the request's credentials were refused, in its extensions when no [`Caller`] is.
#[derive(Debug, Clone)]
pub struct Refused(pub WharfError);

impl Authenticator {
    /// The authenticator of `auth`.
    pub fn new(auth: &AuthConfig) -> anyhow::Result<Self> {
        let access_tokens = match &auth.oauth {
            Some(oauth) => Some(AccessTokens::new(
                oauth,
                auth.tokens.iter().map(|t| t.name.clone()).collect(),
            )?),
            None => None,
        };
        Ok(Self {
            auth: auth.clone(),
            access_tokens,
        })
    }

    /// The caller an `Authorization` header value names.
    pub async fn authenticate(&self, header: Option<&str>) -> Result<Caller, WharfError> {
        if self.auth.is_open() {
            return Ok(Caller::anonymous());
        }
        let presented = bearer(header)?;
        let unknown = || WharfError::new(Code::Unauthorized, "the bearer token is not valid");
        match &self.access_tokens {
            Some(tokens) if AccessTokens::looks_like_jwt(presented) => {
                match tokens.verify(presented).await {
                    Ok(caller) => Ok(caller),
                    // A static token may have a JWT's shape; only then is it not refused.
                    Err(refusal) => static_caller(&self.auth, presented).ok_or(refusal),
                }
            }
            _ => static_caller(&self.auth, presented).ok_or_else(unknown),
        }
    }
}

/// Authenticates the request once, for every route: the [`Caller`] or the [`Refused`]
/// goes into its extensions, and a 401 leaves with the `WWW-Authenticate` challenge.
pub async fn authenticate_request(
    State(authenticator): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let presented = header.is_some();
    let refusal = match authenticator.authenticate(header).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            None
        }
        Err(e) => {
            let why = e.message.clone();
            request.extensions_mut().insert(Refused(e));
            presented.then_some(why)
        }
    };
    let mut response = next.run(request).await;
    if response.status() == axum::http::StatusCode::UNAUTHORIZED {
        let oauth = authenticator.auth.oauth.as_ref();
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            challenge::challenge(oauth, refusal.as_deref()),
        );
    }
    response
}

/// The caller [`authenticate_request`] found for a request, or its refusal.
pub fn caller_in(extensions: &axum::http::Extensions) -> Result<Caller, WharfError> {
    if let Some(caller) = extensions.get::<Caller>() {
        return Ok(caller.clone());
    }
    Err(extensions
        .get::<Refused>()
        .map(|r| r.0.clone())
        .unwrap_or_else(|| {
            WharfError::new(Code::Unauthorized, "the request was not authenticated")
        }))
}

impl FromRequestParts<Arc<Wharf>> for Caller {
    type Rejection = Envelope;

    async fn from_request_parts(
        parts: &mut Parts,
        _wharf: &Arc<Wharf>,
    ) -> Result<Self, Self::Rejection> {
        caller_in(&parts.extensions).map_err(|e| Envelope::error(e, Meta::default()))
    }
}

/// The check for routes that are not axum handlers (MCP, metrics): the request's caller
/// (found by [`authenticate_request`]) must hold the scope. A synchronous `tower_http`
/// `ValidateRequest`, like the edge guard (`api/edge`).
#[derive(Clone)]
pub struct ScopeGuard {
    scope: TokenScope,
}

impl ScopeGuard {
    /// The layer that lets through only callers holding `scope`.
    pub fn layer(scope: TokenScope) -> ValidateRequestHeaderLayer<Self> {
        ValidateRequestHeaderLayer::custom(Self { scope })
    }
}

impl<B> ValidateRequest<B> for ScopeGuard {
    type ResponseBody = axum::body::Body;

    fn validate(
        &mut self,
        request: &mut axum::http::Request<B>,
    ) -> Result<(), axum::response::Response> {
        caller_in(request.extensions())
            .and_then(|c| c.require(self.scope))
            .map_err(Envelope::refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TokenConfig;

    fn auth() -> AuthConfig {
        AuthConfig {
            tokens: vec![
                TokenConfig {
                    backends: Some(vec!["echo".into()]),
                    ..TokenConfig::new("agent", "t-agent", vec![TokenScope::Read, TokenScope::Call])
                },
                TokenConfig::new("ops", "t-ops", vec![TokenScope::Admin]),
                TokenConfig {
                    tools: Some(vec!["echo:say".into()]),
                    ..TokenConfig::new("viewer", "t-view", vec![TokenScope::Read])
                },
            ],
            oauth: None,
        }
    }

    #[tokio::test]
    async fn tokens_scopes_and_allowlists() {
        let a = Authenticator::new(&auth()).unwrap();
        let authenticate = |h: Option<&'static str>| {
            let a = &a;
            async move { a.authenticate(h).await }
        };
        assert_eq!(
            authenticate(None).await.unwrap_err().code,
            Code::Unauthorized
        );
        assert_eq!(
            authenticate(Some("Bearer nope")).await.unwrap_err().code,
            Code::Unauthorized
        );
        assert_eq!(
            authenticate(Some("Basic t-agent")).await.unwrap_err().code,
            Code::Unauthorized
        );
        let agent = authenticate(Some("Bearer t-agent")).await.unwrap();
        assert_eq!(agent.tenant, "agent");
        assert!(agent.require(TokenScope::Call).is_ok());
        assert_eq!(
            agent.require(TokenScope::Admin).unwrap_err().code,
            Code::Forbidden
        );
        assert!(agent.may_use("echo", Some("say")));
        assert!(!agent.may_use("docker", None));
        assert_eq!(agent.session_tenant(), &Tenant::own("agent"));
        let ops = authenticate(Some("Bearer t-ops")).await.unwrap();
        assert!(ops.has(TokenScope::Call));
        assert_eq!(ops.session_tenant(), &Tenant::Every);
        let viewer = authenticate(Some("Bearer t-view")).await.unwrap();
        assert!(viewer.require(TokenScope::Call).is_err());
        assert!(viewer.may_use("echo", Some("say")) && !viewer.may_use("echo", Some("add")));
        let open = Authenticator::new(&AuthConfig::default()).unwrap();
        assert!(open.authenticate(None).await.unwrap().has(TokenScope::Call));
    }
}

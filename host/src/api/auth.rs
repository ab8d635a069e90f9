//! Bearer tokens with scopes. A token is a tenant: sessions are keyed by (tenant, backend,
//! key), and another token sees 4007 as if a session did not exist. With no token
//! configured every caller is the anonymous tenant with `read` and `call` (the server
//! refuses to start that way on a non-loopback address unless `--insecure`); admin routes
//! exist only when an admin token is configured.

use crate::api::envelope::{Envelope, Meta};
use crate::config::{AuthConfig, TokenScope};
use crate::error_code::{Code, WharfError};
use crate::front_door::{ANONYMOUS_TENANT, Wharf};
use crate::principal::Principal;
use crate::tenant::Tenant;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
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

/// Finds the caller for an `Authorization` header value under `auth`.
pub fn authenticate(auth: &AuthConfig, header: Option<&str>) -> Result<Caller, WharfError> {
    if auth.tokens.is_empty() {
        return Ok(Caller::anonymous());
    }
    let presented = header
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
        })?;
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
        .ok_or_else(|| WharfError::new(Code::Unauthorized, "the bearer token is not valid"))
}

impl FromRequestParts<Arc<Wharf>> for Caller {
    type Rejection = Envelope;

    async fn from_request_parts(
        parts: &mut Parts,
        wharf: &Arc<Wharf>,
    ) -> Result<Self, Self::Rejection> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        authenticate(&wharf.server().auth, header).map_err(|e| Envelope::error(e, Meta::default()))
    }
}

/// The check for routes that are not axum handlers (MCP, metrics): authenticates, checks
/// the scope, and puts the [`Caller`] into the request's extensions. A synchronous
/// `tower_http` `ValidateRequest`, like the edge guard (`api/edge`).
#[derive(Clone)]
pub struct ScopeGuard {
    wharf: Arc<Wharf>,
    scope: TokenScope,
}

impl ScopeGuard {
    /// The layer that lets through only callers holding `scope`.
    pub fn layer(wharf: Arc<Wharf>, scope: TokenScope) -> ValidateRequestHeaderLayer<Self> {
        ValidateRequestHeaderLayer::custom(Self { wharf, scope })
    }
}

impl<B> ValidateRequest<B> for ScopeGuard {
    type ResponseBody = axum::body::Body;

    fn validate(
        &mut self,
        request: &mut axum::http::Request<B>,
    ) -> Result<(), axum::response::Response> {
        let header = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let caller = authenticate(&self.wharf.server().auth, header)
            .and_then(|c| c.require(self.scope).map(|()| c))
            .map_err(Envelope::refusal)?;
        request.extensions_mut().insert(caller);
        Ok(())
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
                    name: "agent".into(),
                    value: Some("t-agent".into()),
                    value_file: None,
                    scopes: vec![TokenScope::Read, TokenScope::Call],
                    backends: Some(vec!["echo".into()]),
                    tools: None,
                },
                TokenConfig {
                    name: "ops".into(),
                    value: Some("t-ops".into()),
                    value_file: None,
                    scopes: vec![TokenScope::Admin],
                    backends: None,
                    tools: None,
                },
                TokenConfig {
                    name: "viewer".into(),
                    value: Some("t-view".into()),
                    value_file: None,
                    scopes: vec![TokenScope::Read],
                    backends: None,
                    tools: Some(vec!["echo:say".into()]),
                },
            ],
        }
    }

    #[test]
    fn tokens_scopes_and_allowlists() {
        let a = auth();
        assert_eq!(authenticate(&a, None).unwrap_err().code, Code::Unauthorized);
        assert_eq!(
            authenticate(&a, Some("Bearer nope")).unwrap_err().code,
            Code::Unauthorized
        );
        assert_eq!(
            authenticate(&a, Some("Basic t-agent")).unwrap_err().code,
            Code::Unauthorized
        );
        let agent = authenticate(&a, Some("Bearer t-agent")).unwrap();
        assert_eq!(agent.tenant, "agent");
        assert!(agent.require(TokenScope::Call).is_ok());
        assert_eq!(
            agent.require(TokenScope::Admin).unwrap_err().code,
            Code::Forbidden
        );
        assert!(agent.may_use("echo", Some("say")));
        assert!(!agent.may_use("docker", None));
        assert_eq!(agent.session_tenant(), &Tenant::own("agent"));
        let ops = authenticate(&a, Some("Bearer t-ops")).unwrap();
        assert!(ops.has(TokenScope::Call));
        assert_eq!(ops.session_tenant(), &Tenant::Every);
        let viewer = authenticate(&a, Some("Bearer t-view")).unwrap();
        assert!(viewer.require(TokenScope::Call).is_err());
        assert!(viewer.may_use("echo", Some("say")) && !viewer.may_use("echo", Some("add")));
        assert!(
            authenticate(&AuthConfig::default(), None)
                .unwrap()
                .has(TokenScope::Call)
        );
    }
}

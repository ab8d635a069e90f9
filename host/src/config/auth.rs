//! `[[auth.tokens]]`: bearer tokens, their scopes and allowlists.

use anyhow::{Result, bail};
use serde::Deserialize;
use std::path::PathBuf;

use super::oauth::OAuthConfig;

/// Tokens and what they may do.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The tokens; none means open (loopback only, unless `--insecure`).
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Access tokens from authorization servers (`[auth.oauth]`), beside the static ones.
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
}

/// Token names no token may take: the anonymous tenant, and `*` (read as "every tenant"
/// by tools that grep logs).
pub const RESERVED_TOKEN_NAMES: &[&str] = &["anonymous", "*"];

impl AuthConfig {
    /// Token names are tenants: each must be unique, non-empty, at most 64 characters of
    /// `A-Z a-z 0-9 . _ -`, and not reserved ([`RESERVED_TOKEN_NAMES`]).
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for token in &self.tokens {
            let name = token.name.as_str();
            if RESERVED_TOKEN_NAMES.contains(&name) {
                bail!("token name `{name}` is reserved");
            }
            if !Self::is_tenant_name(name) {
                bail!(
                    "token name `{}` is not valid: use 1 to 64 characters of A-Z a-z 0-9 . _ -",
                    name.escape_debug()
                );
            }
            if !seen.insert(name) {
                bail!(
                    "token name `{name}` is used by two tokens: names are tenants and must be unique"
                );
            }
        }
        if let Some(oauth) = &self.oauth {
            oauth.validate()?;
        }
        Ok(())
    }

    /// Whether a tenant name is well formed: 1 to 64 characters of `A-Z a-z 0-9 . _ -`,
    /// not reserved.
    pub fn is_tenant_name(name: &str) -> bool {
        !RESERVED_TOKEN_NAMES.contains(&name)
            && !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    }

    /// Whether no caller needs a credential: no static token and no `[auth.oauth]`.
    pub fn is_open(&self) -> bool {
        self.tokens.is_empty() && self.oauth.is_none()
    }

    /// Whether any caller can be an admin (admin routes exist only then): a static token
    /// with the scope, or an OAuth scope mapped to it.
    pub fn admin_enabled(&self) -> bool {
        self.tokens
            .iter()
            .any(|t| t.scopes.contains(&TokenScope::Admin))
            || self
                .oauth
                .as_ref()
                .is_some_and(|o| o.scopes.admin.is_some())
    }
}

/// A scope a token grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    /// List backends, tools and own sessions.
    Read,
    /// Call tools, manage own sessions.
    Call,
    /// Load and unload backends; see every session.
    Admin,
}

impl TokenScope {
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Call => "call",
            TokenScope::Admin => "admin",
        }
    }
}

/// One bearer token. Its value comes from the config (usually `${ENV}`) or a file, and is
/// never logged.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The token's name: its tenant, and what logs show.
    pub name: String,
    /// The secret (use `${VAR}`).
    #[serde(default)]
    pub value: Option<String>,
    /// A file holding the secret.
    #[serde(default)]
    pub value_file: Option<PathBuf>,
    /// Scopes.
    pub scopes: Vec<TokenScope>,
    /// Backends it may see and use (all when absent).
    #[serde(default)]
    pub backends: Option<Vec<String>>,
    /// `backend:action` tools it may call (all when absent).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

impl TokenConfig {
    /// A token named `name` whose secret is `value`, with `scopes`, on every backend and
    /// tool (what an operator's `[[auth.tokens]]` entry without allowlists gives).
    pub fn new(name: &str, value: &str, scopes: Vec<TokenScope>) -> Self {
        Self {
            name: name.into(),
            value: Some(value.into()),
            value_file: None,
            scopes,
            backends: None,
            tools: None,
        }
    }

    /// The secret, from `value` or `value_file`.
    pub fn resolved_value(&self) -> Option<String> {
        match (&self.value, &self.value_file) {
            (Some(v), _) if !v.is_empty() => Some(v.clone()),
            (_, Some(path)) => std::fs::read_to_string(path)
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            _ => None,
        }
    }
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("value", &"***")
            .field("scopes", &self.scopes)
            .finish()
    }
}

//! A verified access token's claims as a [`Caller`]: the tenant from the configured claim,
//! Wharf's scopes from the token's `scope` (RFC 9068; `scp` as some servers spell it), and
//! the allowlists from their claims. Pure; the claims are the authorization server's, but
//! their shapes are checked as any input.

use super::Caller;
use crate::config::{AuthConfig, OAuthConfig, TokenScope};
use crate::principal::Principal;
use crate::tenant::Tenant;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Most entries read from an allowlist claim.
const MAX_LIST_ENTRIES: usize = 1024;
/// Longest allowlist entry, bytes.
const MAX_ENTRY_BYTES: usize = 256;

/// The caller the claims describe, or why they describe none.
pub fn caller_from_claims(
    config: &OAuthConfig,
    static_tenants: &BTreeSet<String>,
    claims: &Map<String, Value>,
) -> Result<Caller, String> {
    let claim = &config.tenant_claim;
    let tenant = match claims.get(claim) {
        Some(Value::String(t)) => t,
        Some(_) => return Err(format!("the `{claim}` claim is not a string")),
        None => {
            return Err(format!(
                "the token has no `{claim}` claim to name its tenant"
            ));
        }
    };
    if !AuthConfig::is_tenant_name(tenant) {
        return Err(format!(
            "the `{claim}` claim is not a tenant name (1 to 64 characters of A-Z a-z 0-9 . _ -, not reserved)"
        ));
    }
    // A static token's name is its tenant: a token from a server must not become it.
    if static_tenants.contains(tenant) {
        return Err(format!(
            "the `{claim}` claim names a tenant that belongs to a static token"
        ));
    }
    let scopes = granted_scopes(config, claims);
    let backends = match &config.backends_claim {
        Some(name) => Some(list_claim(claims, name)?),
        None => None,
    };
    let tools = match &config.tools_claim {
        Some(name) => Some(list_claim(claims, name)?),
        None => None,
    };
    Ok(Caller {
        principal: Principal {
            name: tenant.clone(),
            tenant: tenant.clone(),
            view: if scopes.contains(&TokenScope::Admin) {
                Tenant::Every
            } else {
                Tenant::own(tenant.clone())
            },
            backends,
            tools,
        },
        scopes,
    })
}

/// Wharf's scopes that the token's OAuth scopes map to.
fn granted_scopes(config: &OAuthConfig, claims: &Map<String, Value>) -> Vec<TokenScope> {
    let mut granted: Vec<&str> = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => granted.extend(s.split_ascii_whitespace()),
            Some(Value::Array(items)) => granted.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    let names = &config.scopes;
    let mut scopes = Vec::new();
    for (oauth, wharf) in [
        (Some(names.read.as_str()), TokenScope::Read),
        (Some(names.call.as_str()), TokenScope::Call),
        (names.admin.as_deref(), TokenScope::Admin),
    ] {
        if oauth.is_some_and(|o| granted.contains(&o)) {
            scopes.push(wharf);
        }
    }
    scopes
}

/// An allowlist claim: absent is the empty list (the operator asked for the claim, so a
/// token without it may use nothing); anything but a list of short strings is refused.
fn list_claim(claims: &Map<String, Value>, name: &str) -> Result<Vec<String>, String> {
    let Some(value) = claims.get(name) else {
        return Ok(Vec::new());
    };
    let bad = || format!("the `{name}` claim is not a list of names");
    let items = value.as_array().ok_or_else(bad)?;
    if items.len() > MAX_LIST_ENTRIES {
        return Err(format!(
            "the `{name}` claim lists over {MAX_LIST_ENTRIES} entries"
        ));
    }
    items
        .iter()
        .map(|v| {
            v.as_str()
                .filter(|s| !s.is_empty() && s.len() <= MAX_ENTRY_BYTES)
                .map(str::to_string)
                .ok_or_else(bad)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(extra: &str) -> OAuthConfig {
        toml::from_str(&format!(
            "resource = \"https://w.example\"\nauthorization_servers = [\"https://as.example\"]\n{extra}"
        ))
        .unwrap()
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_tenant_and_scopes_come_from_the_claims() {
        let c = config("tenant_claim = \"org\"");
        let caller = caller_from_claims(
            &c,
            &BTreeSet::new(),
            &claims(json!({"sub": "u1", "org": "acme", "scope": "wharf:read openid wharf:call"})),
        )
        .unwrap();
        assert_eq!(caller.tenant, "acme");
        assert_eq!(caller.scopes, [TokenScope::Read, TokenScope::Call]);
        assert_eq!(caller.session_tenant(), &Tenant::own("acme"));
        assert!(caller.may_use("anything", Some("at_all")));
        // `scp` as an array counts too; admin needs the operator to name its scope.
        let only_read = caller_from_claims(
            &c,
            &BTreeSet::new(),
            &claims(json!({"org": "acme", "scp": ["wharf:read", "wharf:admin"]})),
        )
        .unwrap();
        assert_eq!(only_read.scopes, [TokenScope::Read]);
        let admin = config("[scopes]\nadmin = \"wharf:admin\"");
        let ops = caller_from_claims(
            &admin,
            &BTreeSet::new(),
            &claims(json!({"sub": "ops-1", "scope": "wharf:admin"})),
        )
        .unwrap();
        assert!(ops.has(TokenScope::Call));
        assert_eq!(ops.session_tenant(), &Tenant::Every);
    }

    #[test]
    fn hostile_tenant_claims_are_refused() {
        let c = config("");
        let statics: BTreeSet<String> = ["ops".to_string()].into();
        for bad in [
            json!({}),
            json!({"sub": 7}),
            json!({"sub": ""}),
            json!({"sub": "anonymous"}),
            json!({"sub": "*"}),
            json!({"sub": "a/b"}),
            json!({"sub": "x".repeat(65)}),
            json!({"sub": "ops"}),
        ] {
            assert!(
                caller_from_claims(&c, &statics, &claims(bad.clone())).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn allowlist_claims_are_lists_of_names_and_absent_means_none() {
        let c = config("backends_claim = \"wharf_backends\"\ntools_claim = \"wharf_tools\"");
        let none = BTreeSet::new();
        let caller = caller_from_claims(
            &c,
            &none,
            &claims(json!({"sub": "a", "wharf_backends": ["echo"], "wharf_tools": ["echo:say"]})),
        )
        .unwrap();
        assert!(caller.may_use("echo", Some("say")));
        assert!(!caller.may_use("echo", Some("add")) && !caller.may_use("pad", None));
        let bare = caller_from_claims(&c, &none, &claims(json!({"sub": "a"}))).unwrap();
        assert!(!bare.may_use("echo", None));
        for bad in [
            json!({"sub": "a", "wharf_backends": "echo"}),
            json!({"sub": "a", "wharf_backends": [1]}),
            json!({"sub": "a", "wharf_backends": vec!["e"; 2000]}),
            json!({"sub": "a", "wharf_tools": ["x".repeat(300)]}),
        ] {
            assert!(
                caller_from_claims(&c, &none, &claims(bad.clone())).is_err(),
                "{bad}"
            );
        }
    }
}

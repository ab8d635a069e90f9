//! Who a call is for, as the front door needs to know it: the tenant that owns what the
//! call creates, the tenants whose sessions it may see, and the token's allowlists. A leaf:
//! the API layer builds one from a bearer token (`api/auth`), the front door checks it.

use crate::error_code::WharfError;
use crate::tenant::Tenant;

/// The identity and allowlists of whoever calls.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The token's name (for logs; never its value).
    pub name: String,
    /// The tenant: the token's name, or `anonymous`. What the caller creates is its own.
    pub tenant: String,
    /// Whose sessions the caller sees: its own, or every tenant's for an admin.
    pub view: Tenant,
    /// Backends the token may use; `None` is every backend.
    pub backends: Option<Vec<String>>,
    /// Tools (`backend:action`) the token may use; `None` is every tool.
    pub tools: Option<Vec<String>>,
}

impl Principal {
    /// A principal that sees only `tenant`'s sessions and may use every tool.
    pub fn unrestricted(tenant: impl Into<String>) -> Self {
        let tenant = tenant.into();
        Self {
            name: tenant.clone(),
            view: Tenant::own(tenant.clone()),
            tenant,
            backends: None,
            tools: None,
        }
    }

    /// The tenants to look sessions up under: admins see every session.
    pub fn session_tenant(&self) -> &Tenant {
        &self.view
    }

    /// Only the caller's own tenant, even for an admin (what it created itself).
    pub fn own_tenant(&self) -> Tenant {
        Tenant::own(self.tenant.clone())
    }

    /// Whether the allowlists let the caller see or use `backend:action`.
    pub fn may_use(&self, backend: &str, action: Option<&str>) -> bool {
        let backend_ok = self
            .backends
            .as_ref()
            .is_none_or(|list| list.iter().any(|b| b == backend));
        let tool_ok = match (action, &self.tools) {
            (_, None) => true,
            (None, Some(list)) => list.iter().any(|t| t.split(':').next() == Some(backend)),
            (Some(action), Some(list)) => list.iter().any(|t| {
                t.split_once(':')
                    .is_some_and(|(b, a)| b == backend && a == action)
            }),
        };
        backend_ok && tool_ok
    }

    /// 4030 unless the allowlists let the caller use `backend:action`.
    pub fn require_tool(&self, backend: &str, action: Option<&str>) -> Result<(), WharfError> {
        if self.may_use(backend, action) {
            Ok(())
        } else {
            let what = action.map_or(backend.to_string(), |a| format!("{backend}:{a}"));
            Err(WharfError::forbidden(format!(
                "token `{}` may not use `{what}`",
                self.name
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlists_match_whole_names() {
        let p = Principal {
            tools: Some(vec!["echo:say".into()]),
            ..Principal::unrestricted("agent")
        };
        assert!(p.may_use("echo", Some("say")));
        assert!(p.may_use("echo", None));
        assert!(!p.may_use("echo", Some("sa")));
        assert!(!p.may_use("ech", Some("o:say")));
        assert!(p.require_tool("echo", Some("add")).is_err());
    }
}

//! Whose sessions a request may see. A tenant is a token's name (or `anonymous` when no
//! token is configured); only an admin token sees every tenant, and that is a variant of
//! its own, so no name (not even `*`) can stand for "every tenant".

use std::fmt;

/// The tenants a request may see sessions of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tenant {
    /// One tenant's sessions.
    Own(String),
    /// Every tenant's sessions (an admin token).
    Every,
}

impl Tenant {
    /// One tenant's view.
    pub fn own(name: impl Into<String>) -> Self {
        Self::Own(name.into())
    }

    /// Whether a session owned by `owner` is visible.
    pub fn sees(&self, owner: &str) -> bool {
        match self {
            Self::Own(name) => name == owner,
            Self::Every => true,
        }
    }

    /// The one tenant to filter by, or `None` for every tenant.
    pub fn only(&self) -> Option<&str> {
        match self {
            Self::Own(name) => Some(name),
            Self::Every => None,
        }
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Own(name) => f.write_str(name),
            Self::Every => f.write_str("(every tenant)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_never_means_every_tenant() {
        let star = Tenant::own("*");
        assert!(star.sees("*"));
        assert!(!star.sees("agent"));
        assert_eq!(star.only(), Some("*"));
        assert!(Tenant::Every.sees("agent"));
        assert_eq!(Tenant::Every.only(), None);
    }
}

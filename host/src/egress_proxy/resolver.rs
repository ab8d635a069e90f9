//! How the egress proxy resolves a name: once per connection, through the operator's
//! fixed names (`[server] egress_resolve`) or else the host's resolver, within a time
//! limit and to a bounded number of addresses. The proxy checks every address and connects
//! only to one it checked, so a name cannot rebind between check and connect.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// How long a lookup may take.
const LOOKUP_LIMIT: Duration = Duration::from_secs(5);
/// Addresses kept of one answer.
const MAX_ADDRESSES: usize = 16;

/// The proxy's resolver.
#[derive(Debug, Default)]
pub struct Resolver {
    fixed: HashMap<String, Vec<IpAddr>>,
}

/// A name as compared: lower case, no trailing dot.
fn canonical(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Resolver {
    /// A resolver that answers the names of `fixed` itself and asks the host's resolver
    /// for the rest.
    pub fn new(fixed: &BTreeMap<String, Vec<IpAddr>>) -> Self {
        Resolver {
            fixed: fixed
                .iter()
                .map(|(name, addresses)| (canonical(name), addresses.clone()))
                .collect(),
        }
    }

    /// The addresses of `host` (at most 16, in the resolver's order).
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        if let Some(fixed) = self.fixed.get(&canonical(host)) {
            return Ok(fixed.iter().take(MAX_ADDRESSES).copied().collect());
        }
        let found = tokio::time::timeout(LOOKUP_LIMIT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {} s", LOOKUP_LIMIT.as_secs()),
                )
            })??;
        let mut addresses: Vec<IpAddr> = Vec::new();
        for address in found {
            if addresses.len() == MAX_ADDRESSES {
                break;
            }
            if !addresses.contains(&address.ip()) {
                addresses.push(address.ip());
            }
        }
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fixed_names_answer_first_in_any_case() {
        let fixed = BTreeMap::from([(
            "Allowed.Test".to_string(),
            vec!["127.0.0.1".parse().unwrap()],
        )]);
        let r = Resolver::new(&fixed);
        assert_eq!(
            r.resolve("allowed.test.", 80).await.unwrap(),
            vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert!(!r.resolve("localhost", 80).await.unwrap().is_empty());
    }
}

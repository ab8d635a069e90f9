//! Sandbox egress by name: what a session may ask its sandbox to reach
//! (`network.allow_egress_to`, `allow_egress_to_cidrs`), bounded by the backend's grants
//! (`egress_to`, `egress_cidrs`), and the rule the host's egress proxy applies to every
//! connection the sandbox makes. Pure: no sockets, no resolver.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::outbound_http::is_restricted;
use super::{Denial, Grants, normalize};

/// Entries a session's allowlist may have (names and CIDRs, each).
pub const MAX_EGRESS_ENTRIES: usize = 64;
/// The longest entry (a DNS name is at most 253 bytes, plus `:port`).
const MAX_ENTRY_BYTES: usize = 260;

/// What a session asks its sandbox to reach, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressAsk {
    /// `host`, `host:port`, `*.suffix`, `*.suffix:port` (no port: any port).
    pub hosts: Vec<String>,
    /// Address ranges reachable by address, and where a name may resolve to a private,
    /// loopback or link-local address.
    pub cidrs: Vec<String>,
}

impl EgressAsk {
    /// Whether it asks for anything (an empty ask is an open or blocked network instead).
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.cidrs.is_empty()
    }
}

/// One `host[:port]` pattern: a lower-case name (or `*.suffix`, or `*`), and a port or any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPattern {
    /// `example.com`, `*.example.com` or `*`.
    pub host: String,
    /// `None`: any port.
    pub port: Option<u16>,
}

impl HostPattern {
    /// Parses `host`, `host:port`, `*.suffix[:port]`, `*[:port]`, `[v6]:port`; the port
    /// `*` is any port.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let entry = entry.trim();
        if entry.is_empty() || entry.len() > MAX_ENTRY_BYTES {
            return Err(format!(
                "`{}` is not a host pattern",
                entry.chars().take(64).collect::<String>()
            ));
        }
        let (host, port) = split_port(entry)?;
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let literal_ip = host.parse::<IpAddr>().is_ok();
        let valid_name = !name.is_empty()
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if host != "*" && !literal_ip && !valid_name {
            return Err(format!(
                "`{entry}` is not a host pattern (a name, `*.name` or `*`, then `:port` or `:*`)"
            ));
        }
        Ok(HostPattern { host, port })
    }

    /// Whether `host:port` (host lower-case, no trailing dot) matches.
    fn matches(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
            && (self.host == "*"
                || self.host == host
                || self
                    .host
                    .strip_prefix('*')
                    .is_some_and(|dot_suffix| host.ends_with(dot_suffix)))
    }

    /// Whether every `host:port` that `narrower` matches, this matches too.
    fn covers(&self, narrower: &HostPattern) -> bool {
        let port_ok = match (self.port, narrower.port) {
            (None, _) => true,
            (Some(mine), Some(theirs)) => mine == theirs,
            (Some(_), None) => false,
        };
        let host_ok = self.host == "*"
            || self.host == narrower.host
            || (narrower.host != "*"
                && self
                    .host
                    .strip_prefix('*')
                    .is_some_and(|dot_suffix| narrower.host.ends_with(dot_suffix)));
        port_ok && host_ok
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host}:*"),
        }
    }
}

fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    let bad_port = || format!("`{entry}`: the port must be 1-65535 or `*`");
    let parse_port = |port: &str| -> Result<Option<u16>, String> {
        if port == "*" {
            return Ok(None);
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(Some(p)),
            _ => Err(bad_port()),
        }
    };
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{entry}`: an unclosed `[`"))?;
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, parse_port(port)?)),
            None if after.is_empty() => Ok((host, None)),
            None => Err(bad_port()),
        };
    }
    // A bare IPv6 address has colons of its own and no port.
    if entry.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((entry, None));
    }
    match entry.rsplit_once(':') {
        Some((host, port)) => Ok((host, parse_port(port)?)),
        None => Ok((entry, None)),
    }
}

/// What a sandbox may reach through the host's egress proxy, and its budget. Written into
/// the container's `wharf.egress` label, so a restarted host applies the same rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRule {
    /// Names (and literal addresses) the sandbox may connect to.
    pub hosts: Vec<HostPattern>,
    /// Ranges reachable by address, and where a name may resolve to a restricted address.
    pub cidrs: Vec<IpNet>,
    /// Bytes (both ways) the session's sandboxes may move through the proxy.
    pub max_bytes: u64,
    /// Connections one sandbox may have open through the proxy at once.
    pub max_connections: u32,
}

/// Why the proxy refuses a connection, in words for the sandbox and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressRefusal {
    /// The name (or literal address) and port are not in the session's allowlist.
    NotAllowed(String),
    /// The name resolved to an address outside what may be reached.
    Address(String),
}

impl std::fmt::Display for EgressRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EgressRefusal::NotAllowed(m) | EgressRefusal::Address(m) => f.write_str(m),
        }
    }
}

impl EgressRule {
    /// Checks a connection to `host:port` before anything is resolved: a literal address
    /// must be in `cidrs` or listed and public; a name must be listed.
    pub fn check_target(&self, host: &str, port: u16) -> Result<(), EgressRefusal> {
        let host = host
            .trim_end_matches('.')
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let listed = self.hosts.iter().any(|p| p.matches(&host, port));
        if let Ok(ip) = host.parse::<IpAddr>() {
            return if self.in_cidrs(ip) || (listed && !is_restricted(normalize(ip))) {
                Ok(())
            } else {
                Err(EgressRefusal::NotAllowed(format!(
                    "{host}:{port} is not in this sandbox's egress allowlist (an address needs allow_egress_to_cidrs)"
                )))
            };
        }
        if listed {
            Ok(())
        } else {
            Err(EgressRefusal::NotAllowed(format!(
                "{host}:{port} is not in this sandbox's egress allowlist"
            )))
        }
    }

    /// Checks what a listed name resolved to: every address must be public, or inside
    /// `cidrs` (so a name that rebinds to a private or metadata address is refused).
    pub fn check_addresses(&self, host: &str, addresses: &[IpAddr]) -> Result<(), EgressRefusal> {
        if addresses.is_empty() {
            return Err(EgressRefusal::Address(format!("{host} has no address")));
        }
        match addresses
            .iter()
            .find(|ip| is_restricted(normalize(**ip)) && !self.in_cidrs(**ip))
        {
            Some(ip) => Err(EgressRefusal::Address(format!(
                "{host} resolves to {ip}, a private, loopback, link-local or metadata address outside allow_egress_to_cidrs"
            ))),
            None => Ok(()),
        }
    }

    fn in_cidrs(&self, ip: IpAddr) -> bool {
        let ip = normalize(ip);
        self.cidrs.iter().any(|net| net.contains(&ip))
    }
}

impl Grants {
    /// The rule for a session's `ask`: each name pattern must be covered by a
    /// `grants.egress_to` pattern and each range inside a `grants.egress_cidrs` range;
    /// anything beyond is refused, never narrowed.
    pub fn egress_rule(&self, ask: &EgressAsk) -> Result<EgressRule, Denial> {
        if ask.hosts.len() > MAX_EGRESS_ENTRIES || ask.cidrs.len() > MAX_EGRESS_ENTRIES {
            return Err(Denial(format!(
                "an egress allowlist has at most {MAX_EGRESS_ENTRIES} names and {MAX_EGRESS_ENTRIES} ranges"
            )));
        }
        let granted_hosts = self.egress_host_grants()?;
        let granted_cidrs = self.egress_cidr_grants()?;
        let mut hosts = Vec::with_capacity(ask.hosts.len());
        for entry in &ask.hosts {
            let pattern = HostPattern::parse(entry).map_err(Denial)?;
            if !granted_hosts.iter().any(|g| g.covers(&pattern)) {
                return Err(Denial(format!(
                    "egress to `{pattern}` is not granted: {}",
                    self.how_to_grant("egress_to", &pattern.to_string(), &self.egress_to)
                )));
            }
            hosts.push(pattern);
        }
        let mut cidrs = Vec::with_capacity(ask.cidrs.len());
        for entry in &ask.cidrs {
            let net = entry
                .trim()
                .parse::<IpNet>()
                .map_err(|e| Denial(format!("allow_egress_to_cidrs: `{entry}`: {e}")))?
                .trunc();
            if !granted_cidrs.iter().any(|g| g.contains(&net)) {
                return Err(Denial(format!(
                    "egress to `{net}` is not granted: {}",
                    self.how_to_grant("egress_cidrs", &net.to_string(), &self.egress_cidrs)
                )));
            }
            cidrs.push(net);
        }
        Ok(EgressRule {
            hosts,
            cidrs,
            max_bytes: self.max_egress_bytes_per_session,
            max_connections: self.max_egress_connections,
        })
    }

    pub(super) fn egress_host_grants(&self) -> Result<Vec<HostPattern>, Denial> {
        self.egress_to
            .iter()
            .map(|g| HostPattern::parse(g).map_err(|e| Denial(format!("grants.egress_to: {e}"))))
            .collect()
    }

    pub(super) fn egress_cidr_grants(&self) -> Result<Vec<IpNet>, Denial> {
        self.egress_cidrs
            .iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .map_err(|e| Denial(format!("grants.egress_cidrs: `{c}`: {e}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants() -> Grants {
        Grants {
            egress_to: vec![
                "*.pypi.org:443".into(),
                "files.example.com".into(),
                "*.test:*".into(),
                "93.184.216.34:443".into(),
            ],
            egress_cidrs: vec!["127.0.0.0/8".into(), "203.0.113.0/24".into()],
            ..Grants::default()
        }
    }

    fn ask(hosts: &[&str], cidrs: &[&str]) -> EgressAsk {
        EgressAsk {
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn patterns_parse_and_refuse_garbage() {
        let p = HostPattern::parse("Files.Example.com.:8080").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("files.example.com", Some(8080)));
        assert_eq!(HostPattern::parse("*.x.org").unwrap().port, None);
        assert_eq!(HostPattern::parse("[::1]:80").unwrap().host, "::1");
        assert_eq!(HostPattern::parse("::1").unwrap().port, None);
        for bad in [
            "",
            "a b",
            "x:0",
            "x:65536",
            "x:-1",
            "a..b",
            "*x.org",
            "**",
            "x/y",
            "[::1",
            "host:port:9",
            "ex ample.com:1",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(HostPattern::parse(&"a".repeat(300)).is_err());
    }

    #[test]
    fn an_ask_beyond_the_grant_is_refused_never_narrowed() {
        let g = grants();
        assert!(g.egress_rule(&ask(&["pypi.org:443"], &[])).is_err());
        assert!(g.egress_rule(&ask(&["files.pypi.org:443"], &[])).is_ok());
        assert!(g.egress_rule(&ask(&["*.files.pypi.org:443"], &[])).is_ok());
        assert!(
            g.egress_rule(&ask(&["files.pypi.org"], &[])).is_err(),
            "any port is wider"
        );
        assert!(g.egress_rule(&ask(&["files.pypi.org:80"], &[])).is_err());
        assert!(g.egress_rule(&ask(&["files.example.com:9"], &[])).is_ok());
        assert!(g.egress_rule(&ask(&["*"], &[])).is_err());
        assert!(
            g.egress_rule(&ask(&["allowed.test:8080"], &["127.0.0.1/32"]))
                .is_ok()
        );
        assert!(g.egress_rule(&ask(&[], &["10.0.0.0/8"])).is_err());
        assert!(g.egress_rule(&ask(&[], &["127.0.0.0/7"])).is_err());
        assert!(g.egress_rule(&ask(&[], &["nonsense"])).is_err());
        let err = g.egress_rule(&ask(&["evil.com:443"], &[])).unwrap_err();
        assert!(err.0.contains("grants.egress_to"), "{err}");
        let many: Vec<String> = (0..65).map(|i| format!("h{i}.test:1")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(g.egress_rule(&ask(&many, &[])).is_err());
        assert!(
            Grants::default()
                .egress_rule(&ask(&["a.test:1"], &[]))
                .is_err()
        );
    }

    #[test]
    fn the_rule_checks_names_addresses_and_rebinding() {
        let rule = grants()
            .egress_rule(&ask(
                &["allowed.test:8080", "*.pypi.org:443", "93.184.216.34:443"],
                &["127.0.0.1/32"],
            ))
            .unwrap();
        assert!(rule.check_target("allowed.test", 8080).is_ok());
        assert!(rule.check_target("ALLOWED.test.", 8080).is_ok());
        assert!(rule.check_target("allowed.test", 8081).is_err());
        assert!(rule.check_target("other.test", 8080).is_err());
        assert!(rule.check_target("files.pypi.org", 443).is_ok());
        assert!(rule.check_target("pypi.org", 443).is_err());
        assert!(rule.check_target("evilpypi.org", 443).is_err());
        // Addresses: inside the ranges, or listed and public.
        assert!(rule.check_target("127.0.0.1", 9).is_ok());
        assert!(rule.check_target("127.0.0.2", 8080).is_err());
        assert!(rule.check_target("[::ffff:127.0.0.1]", 9).is_ok());
        assert!(rule.check_target("93.184.216.34", 443).is_ok());
        assert!(rule.check_target("93.184.216.35", 443).is_err());
        assert!(rule.check_target("93.184.216.34", 80).is_err());
        assert!(rule.check_target("169.254.169.254", 80).is_err());
        // What a listed name resolves to.
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(
            rule.check_addresses("allowed.test", &[ip("127.0.0.1")])
                .is_ok()
        );
        assert!(rule.check_addresses("x", &[ip("93.184.216.34")]).is_ok());
        for private in [
            "10.0.0.1",
            "169.254.169.254",
            "127.0.0.2",
            "::1",
            "::ffff:10.1.1.1",
        ] {
            let refused = rule.check_addresses("rebind.test", &[ip("93.184.216.34"), ip(private)]);
            assert!(
                matches!(refused, Err(EgressRefusal::Address(_))),
                "{private}"
            );
        }
        assert!(rule.check_addresses("x", &[]).is_err());
    }
}

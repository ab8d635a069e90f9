//! Outbound HTTP: which `host:port` names a backend may reach, and which resolved
//! addresses (loopback, private, link-local and the like only inside a granted range).

use super::Grants;
use ipnet::IpNet;
use std::net::IpAddr;

impl Grants {
    /// Whether outbound HTTP to `host:port` is granted by name.
    pub fn http_host_allowed(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.http_hosts.iter().any(|pattern| {
            let Some((p_host, p_port)) = pattern.rsplit_once(':') else {
                return false;
            };
            let port_ok = p_port == "*" || p_port.parse::<u16>().is_ok_and(|p| p == port);
            let p_host = p_host.to_ascii_lowercase();
            let host_ok = p_host == "*"
                || p_host == host
                || p_host
                    .strip_prefix("*.")
                    .is_some_and(|suffix| host.ends_with(&format!(".{suffix}")));
            port_ok && host_ok
        })
    }

    /// Whether a resolved address may be connected to: public addresses yes; loopback,
    /// private, link-local (cloud metadata), CGNAT, unspecified and multicast only inside a
    /// granted `http_private_cidrs` range. IPv4-mapped IPv6 is checked as IPv4.
    pub fn ip_allowed(&self, ip: IpAddr) -> bool {
        let ip = normalize(ip);
        if !is_restricted(ip) {
            return true;
        }
        self.http_private_cidrs
            .iter()
            .filter_map(|c| c.parse::<IpNet>().ok())
            .any(|net| net.contains(&ip))
    }
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as plain IPv4.
pub fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Loopback, private, link-local (cloud metadata), CGNAT, unspecified, broadcast,
/// multicast, documentation and reserved addresses.
pub(super) fn is_restricted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4().is_some_and(|v4| is_restricted(IpAddr::V4(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_hosts_and_addresses() {
        let g = crate::policy::tests::grants();
        assert!(g.http_host_allowed("api.example.com", 443));
        assert!(g.http_host_allowed("API.example.com.", 443));
        assert!(!g.http_host_allowed("api.example.com", 80));
        assert!(g.http_host_allowed("a.b.example.org", 8443));
        assert!(!g.http_host_allowed("example.org", 443));
        assert!(!g.http_host_allowed("evil-example.org", 443));
        assert!(g.http_host_allowed("127.0.0.1", 8080));
        let d = Grants::default();
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.3.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(!d.ip_allowed(ip.parse().unwrap()), "{ip} must be refused");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "::ffff:93.184.216.34",
        ] {
            assert!(d.ip_allowed(ip.parse().unwrap()), "{ip} is public");
        }
        assert!(g.ip_allowed("127.0.0.1".parse().unwrap()));
        assert!(g.ip_allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!g.ip_allowed("169.254.169.254".parse().unwrap()));
    }
}

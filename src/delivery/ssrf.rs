//! The SSRF guard: callbacks may only go to public addresses unless the operator allows more
//! (`[delivery.ssrf] allow_cidrs`). Host names are resolved by the guard itself and only the
//! addresses it approved are handed to the HTTP client, so nothing is resolved again between the
//! check and the connection.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Which callback addresses are allowed.
#[derive(Debug, Clone)]
pub struct Guard {
    enabled: bool,
    allow: Vec<IpNet>,
    /// Accept `user:password@` in callback URLs.
    credentials: bool,
}

impl Guard {
    pub fn new(enabled: bool, allow: Vec<IpNet>) -> Self {
        Self {
            enabled,
            allow,
            credentials: false,
        }
    }

    /// Lets callback URLs carry credentials (`https://user:password@host/`).
    pub fn allow_credentials(mut self, allow: bool) -> Self {
        self.credentials = allow;
        self
    }

    /// Whether a callback may connect to `ip`.
    pub fn allows(&self, ip: IpAddr) -> bool {
        !self.enabled || self.allow.iter().any(|n| n.contains(&ip)) || !is_internal(ip)
    }

    /// Whether a callback URL is allowed: no credentials (unless allowed), and for an IP address
    /// as host, an allowed address (a host name is checked when it is resolved).
    ///
    /// # Errors
    /// Says why the URL is refused.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let Ok(parsed) = url::Url::parse(url) else {
            return Ok(());
        };
        if !self.credentials && (!parsed.username().is_empty() || parsed.password().is_some()) {
            return Err("it carries credentials (user:password@)".into());
        }
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            _ => return Ok(()),
        };
        if self.allows(ip) {
            Ok(())
        } else {
            Err(format!(
                "{ip} is a loopback, private, link-local or reserved address"
            ))
        }
    }
}

/// Addresses that are not on the public internet: loopback, private, link-local, CGNAT,
/// multicast, reserved and documentation ranges, and every IPv6 form that embeds an IPv4 address.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => is_internal_v6(v6),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard 100::/64
        // IPv4 embedded: mapped ::ffff:0:0/96, compatible ::/96, NAT64 64:ff9b::/96 and
        // 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32.
        || (s[0..5] == [0, 0, 0, 0, 0] && (s[5] == 0xffff || s[5] == 0))
        || (s[0] == 0x0064 && s[1] == 0xff9b)
        || s[0] == 0x2002
        || (s[0] == 0x2001 && s[1] == 0)
}

/// The resolver handed to reqwest: resolves, keeps only allowed addresses, fails when none is.
pub struct GuardedResolver {
    pub guard: Arc<Guard>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|a| guard.allows(a.ip()))
                .collect();
            if allowed.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> =
                    format!("blocked: {host} resolves only to loopback, private, link-local or reserved addresses").into();
                return Err(err);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:0:4136:e378::1",
            "2001:db8::1",
            "::127.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700:4700::1111",
            "2a00:1450::1",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn allow_list_and_switch() {
        let g = Guard::new(true, vec!["127.0.0.1/32".parse().unwrap()]);
        assert!(g.allows("127.0.0.1".parse().unwrap()));
        assert!(!g.allows("127.0.0.2".parse().unwrap()));
        assert!(g.check_url("http://127.0.0.1:8080/x").is_ok());
        assert!(g.check_url("http://[::1]/x").is_err());
        assert!(g.check_url("http://10.0.0.1/x").is_err());
        assert!(
            g.check_url("http://example.com/x").is_ok(),
            "names are checked when resolved"
        );
        assert!(Guard::new(false, vec![]).allows("10.0.0.1".parse().unwrap()));
        assert!(g.check_url("http://user:pw@example.com/x").is_err());
        assert!(g.check_url("http://user@example.com/x").is_err());
        assert!(
            g.clone()
                .allow_credentials(true)
                .check_url("http://user:pw@example.com/x")
                .is_ok()
        );
    }

    #[tokio::test]
    async fn resolver_filters_names() {
        let r = GuardedResolver {
            guard: Arc::new(Guard::new(true, vec![])),
        };
        let name: Name = "localhost".parse().unwrap();
        assert!(r.resolve(name).await.is_err());
        let r = GuardedResolver {
            guard: Arc::new(Guard::new(true, vec!["127.0.0.0/8".parse().unwrap()])),
        };
        let addrs: Vec<SocketAddr> = r
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback() && a.is_ipv4()));
    }
}

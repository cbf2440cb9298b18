//! The callback URL policy, one set of rules for every way a hook comes to exist (`hooks/create`,
//! the configuration's permanent hooks, hooks read back from Redis or imported from the
//! reference service) and for every delivery: an absolute http(s) URL with a host, at most
//! [`MAX_LEN`] characters, no credentials unless allowed, `https` when callbacks carry the
//! secret as a bearer token, and (the SSRF guard) public addresses only unless the operator
//! allows more (`[delivery.ssrf] allow_cidrs`). Host names are checked when they are resolved
//! (`delivery::ssrf`), so that the address checked is the one connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Longest callback URL accepted.
pub const MAX_LEN: usize = 2048;

/// Why a callback URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a usable URL at all (the API answers the message as is).
    #[error("{0}")]
    Invalid(&'static str),
    /// A URL, but one the policy does not allow.
    #[error("not allowed: {0}")]
    NotAllowed(String),
}

/// Checks that a callback URL is an absolute http(s) URL with a host, within [`MAX_LEN`].
///
/// # Errors
/// Says what is wrong, for the API's answer.
pub fn validate(url: &str) -> Result<url::Url, Refusal> {
    if url.len() > MAX_LEN {
        return Err(Refusal::Invalid(
            "callbackURL is too long (at most 2048 characters).",
        ));
    }
    let invalid = Refusal::Invalid("callbackURL must be an absolute http or https URL.");
    let parsed = url::Url::parse(url).map_err(|_| invalid.clone())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid);
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Refusal::Invalid("callbackURL must name a host."));
    }
    Ok(parsed)
}

/// Which callback URLs, and which addresses, are allowed.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The SSRF check is on: internal addresses are refused unless in `allow`.
    enabled: bool,
    allow: Vec<IpNet>,
    /// Accept `user:password@` in callback URLs.
    credentials: bool,
    /// Refuse plain `http`: callbacks carry the shared secret (bearer mode).
    https_only: bool,
}

impl Guard {
    pub fn new(enabled: bool, allow: Vec<IpNet>) -> Self {
        Self {
            enabled,
            allow,
            credentials: false,
            https_only: false,
        }
    }

    /// Lets callback URLs carry credentials (`https://user:password@host/`).
    pub fn allow_credentials(mut self, allow: bool) -> Self {
        self.credentials = allow;
        self
    }

    /// Refuses plain `http` URLs (the secret would cross the network in clear).
    pub fn https_only(mut self, on: bool) -> Self {
        self.https_only = on;
        self
    }

    /// Whether a callback may connect to `ip`.
    pub fn allows(&self, ip: IpAddr) -> bool {
        !self.enabled || self.allow.iter().any(|n| n.contains(&ip)) || !is_internal(ip)
    }

    /// Whether a callback URL is allowed: a valid URL ([`validate`]), no credentials (unless
    /// allowed), `https` where required, and for an IP address as host, an allowed address (a
    /// host name is checked when it is resolved).
    ///
    /// # Errors
    /// Says why the URL is refused.
    pub fn check_url(&self, url: &str) -> Result<(), Refusal> {
        let parsed = validate(url)?;
        let refuse = |why: String| Err(Refusal::NotAllowed(why));
        if !self.credentials && (!parsed.username().is_empty() || parsed.password().is_some()) {
            return refuse("it carries credentials (user:password@)".into());
        }
        if self.https_only && parsed.scheme() != "https" {
            return refuse(
                "callbacks carry the shared secret as a bearer token, so they need https \
                 (or delivery.allow_insecure_bearer = true)"
                    .into(),
            );
        }
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            _ => return Ok(()),
        };
        if self.allows(ip) {
            Ok(())
        } else {
            refuse(format!(
                "{ip} is a loopback, private, link-local or reserved address"
            ))
        }
    }
}

/// Addresses that are not on the public internet. IPv4: loopback, private, link-local, CGNAT,
/// multicast, reserved, benchmarking and documentation ranges (a deny-list). IPv6: everything but
/// global unicast (an allow-list, see [`is_global_unicast_v6`]).
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
    !is_global_unicast_v6(ip)
}

/// Global unicast, 2000::/3, less the special ranges inside it: IETF protocol assignments
/// 2001::/23 (Teredo, benchmarking, ORCHID, ...), documentation 2001:db8::/32 and 3fff::/20,
/// and 6to4 2002::/16 (it embeds an IPv4 address). Anything outside 2000::/3 (loopback,
/// unspecified, IPv4-mapped and -compatible, NAT64, discard, unique local, link-local,
/// site-local, multicast, and whatever is assigned there in future) is not.
pub fn is_global_unicast_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    (s[0] & 0xe000) == 0x2000
        && !(s[0] == 0x2001 && s[1] < 0x0200) // 2001::/23
        && !(s[0] == 0x2001 && s[1] == 0x0db8) // 2001:db8::/32
        && s[0] != 0x2002 // 2002::/16
        && (s[0] & 0xfff0) != 0x3ff0 // 3fff::/20 (3ff0::/12 is unassigned too)
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
            "2001:2::1",
            "2001:10::1",
            "3fff::1",
            "100::1",
            "4000::1",
            "e000::1",
            "5f00::1",
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
            "2001:4860:4860::8888",
            "2c0f:fb50::1",
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
        for bad in [
            "",
            "::nope",
            "example.com/cb",
            "ftp://h/x",
            "http://",
            "http://[::1",
        ] {
            assert!(
                matches!(g.check_url(bad), Err(Refusal::Invalid(_))),
                "{bad} cannot be parsed, so it is refused"
            );
        }
        assert!(g.check_url("http://user@example.com/x").is_err());
        assert!(
            g.clone()
                .allow_credentials(true)
                .check_url("http://user:pw@example.com/x")
                .is_ok()
        );
    }

    #[test]
    fn bearer_mode_wants_https() {
        let g = Guard::new(false, vec![]).https_only(true);
        assert!(g.check_url("https://example.com/x").is_ok());
        let err = g.check_url("http://example.com/x").unwrap_err().to_string();
        assert!(err.contains("allow_insecure_bearer"), "{err}");
    }

    #[test]
    fn urls() {
        assert!(validate("http://example.com/cb?x=1").is_ok());
        assert!(validate("https://10.0.0.1:8080/").is_ok());
        for bad in [
            "",
            "example.com/cb",
            "ftp://h/x",
            "javascript:alert(1)",
            "http://",
        ] {
            assert!(validate(bad).is_err(), "{bad}");
        }
        assert!(validate(&format!("http://h/{}", "a".repeat(2100))).is_err());
    }
}

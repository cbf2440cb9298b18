//! Who made a request, for the audit: the peer, or, when the peer is a trusted proxy (`api.
//! trusted_proxies`), the address its `X-Forwarded-For` names: the rightmost one that is not
//! itself a trusted proxy (the ones left of it could be written by anyone).

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::ConnectInfo,
    http::{Extensions, HeaderMap},
};

/// What the audit says of a request over the admin API's Unix socket.
pub const UNIX_SOCKET: &str = "unix-socket";

/// The caller of a request from `peer` (`None`: a Unix socket) carrying `forwarded_for` (the
/// `X-Forwarded-For` headers' values, joined by commas), given the `trusted` proxies.
pub fn caller(
    peer: Option<IpAddr>,
    forwarded_for: Option<&str>,
    trusted: &[ipnet::IpNet],
) -> String {
    let Some(peer) = peer else {
        return UNIX_SOCKET.to_string();
    };
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer.to_string();
    }
    let Some(list) = forwarded_for else {
        return peer.to_string();
    };
    let mut leftmost = None;
    for entry in list.rsplit(',').map(str::trim) {
        let Ok(ip) = entry.parse::<IpAddr>() else {
            // Not an address: what is left of it cannot be told apart; the last proxy is.
            return leftmost.unwrap_or(peer).to_string();
        };
        if !is_trusted(&ip) {
            return ip.to_string();
        }
        leftmost = Some(ip);
    }
    leftmost.unwrap_or(peer).to_string()
}

/// The caller of a request with `extensions` and `headers`: its peer as the TCP server
/// records it (none over a Unix socket), or what a trusted proxy says ([`caller`]).
pub fn caller_of(extensions: &Extensions, headers: &HeaderMap, trusted: &[ipnet::IpNet]) -> String {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let list: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let joined = (!list.is_empty()).then(|| list.join(","));
    caller(peer, joined.as_deref(), trusted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn only_a_trusted_proxy_names_the_caller() {
        let trusted: Vec<ipnet::IpNet> = vec![
            "127.0.0.1/32".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ];
        // An untrusted peer is the caller, whatever it says.
        assert_eq!(
            caller(ip("203.0.113.9"), Some("198.51.100.1"), &trusted),
            "203.0.113.9"
        );
        // A trusted one: the rightmost address that is not a proxy of ours.
        assert_eq!(
            caller(
                ip("127.0.0.1"),
                Some("198.51.100.1, 203.0.113.7, 10.1.2.3"),
                &trusted
            ),
            "203.0.113.7"
        );
        assert_eq!(caller(ip("127.0.0.1"), None, &trusted), "127.0.0.1");
        assert_eq!(
            caller(ip("127.0.0.1"), Some("10.0.0.5"), &trusted),
            "10.0.0.5"
        );
        assert_eq!(
            caller(ip("127.0.0.1"), Some("junk, 10.0.0.5"), &trusted),
            "10.0.0.5"
        );
        assert_eq!(caller(ip("127.0.0.1"), Some("junk"), &trusted), "127.0.0.1");
        assert_eq!(caller(ip("::1"), Some("198.51.100.1"), &trusted), "::1");
        assert_eq!(caller(None, Some("198.51.100.1"), &trusted), UNIX_SOCKET);
    }
}

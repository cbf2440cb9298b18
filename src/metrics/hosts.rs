//! The `Host` a listener without credentials answers for: its bind address, `localhost` and
//! the names configured, and `421 Misdirected Request` with nothing else for any other. A page
//! whose name re-resolves to 127.0.0.1 (DNS rebinding) reaches the listener from an operator's
//! browser, but its requests carry that page's name as `Host`.

use std::{net::IpAddr, sync::Arc};

use axum::{
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

/// The host names (lowercase, without a port) a listener answers for.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    /// For a listener bound to `bind` (none: a Unix socket) and the `configured` names.
    pub(crate) fn new(bind: Option<IpAddr>, configured: &[String]) -> Self {
        let mut allowed: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|h| (*h).to_string())
            .collect();
        if let Some(ip) = bind.filter(|ip| !ip.is_unspecified()) {
            allowed.push(ip.to_string());
        }
        allowed.extend(configured.iter().map(|h| h.trim().to_ascii_lowercase()));
        Self { allowed }
    }

    /// Whether a request with this `Host` header is answered: one of the names, whatever the
    /// port; a request without one (HTTP/1.0) too.
    pub(crate) fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return true;
        };
        let name = host_name(host).to_ascii_lowercase();
        self.allowed.contains(&name)
    }
}

/// `host` without its port, and without the brackets of an IPv6 address.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Axum middleware: 421 unless [`Hosts::allows`] the request's `Host`.
pub(crate) async fn require(State(hosts): State<Arc<Hosts>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    if hosts.allows(host) {
        return next.run(req).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        "this listener does not answer for that host name\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bind_address_localhost_and_configured_names_only() {
        let hosts = Hosts::new(Some("127.0.0.1".parse().unwrap()), &["Mon.Example".into()]);
        for ok in [
            "127.0.0.1:3004",
            "localhost:3004",
            "LOCALHOST",
            "[::1]:3004",
            "mon.example:9999",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example:3004",
            "127.0.0.1.evil.example",
            "localhost.evil.example:3004",
            "10.0.0.1:3004",
            "",
        ] {
            assert!(!hosts.allows(Some(refused)), "{refused}");
        }
        assert!(hosts.allows(None));
        let own = Hosts::new(Some("10.0.0.5".parse().unwrap()), &[]);
        assert!(own.allows(Some("10.0.0.5:3004")));
        let socket = Hosts::new(None, &[]);
        assert!(socket.allows(Some("localhost:9095")));
        assert!(!socket.allows(Some("rebound.example:9095")));
    }
}

//! TLS to Redis: `rediss://` URLs, their servers verified against a file of CA certificates
//! (`ca_file` keys) or the system's roots; which failures are a certificate that does not
//! verify; and which URLs send a password in clear text beyond this machine.

use std::sync::Arc;

use redis::{ConnectionAddr, ConnectionInfo, RedisError, TlsCertificates};

pub(crate) use crate::base::ca::Ca;

/// `ca`'s certificates as the redis crate takes them.
pub(crate) fn certificates(ca: &Ca) -> TlsCertificates {
    TlsCertificates {
        client_tls: None,
        root_cert: Some(ca.pem().to_vec()),
    }
}

/// The ring provider as the process's default, which the redis crate's TLS uses (as do
/// reqwest's clients); installing it twice is harmless.
pub(crate) fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client of `info`: over TLS verified against `ca` when given and the address is TLS.
pub(super) fn client(info: ConnectionInfo, ca: Option<&Ca>) -> redis::RedisResult<redis::Client> {
    let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
    if tls {
        install_provider();
    }
    match ca {
        Some(ca) if tls => redis::Client::build_with_tls(info, certificates(ca)),
        _ => redis::Client::open(info),
    }
}

/// Why the server's certificate did not verify, when that is why `e` happened; `None` for
/// any other failure (the server down, a refused password, ...).
pub(crate) fn certificate_failure(e: &RedisError) -> Option<String> {
    type Shared = Arc<dyn std::error::Error + Send + Sync>;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        // The redis crate keeps what went wrong behind an `Arc`, and `io::Error` shows the
        // error it wraps only through `get_ref`: both are looked into.
        let inner = s.downcast_ref::<Shared>().map_or(s, |a| &**a as _);
        let io = inner
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        let tls = match io {
            Some(wrapped) => wrapped.downcast_ref::<rustls::Error>(),
            None => inner.downcast_ref::<rustls::Error>(),
        };
        if let Some(r) = tls {
            return is_certificate(r).then(|| r.to_string());
        }
        source = s.source();
    }
    None
}

fn is_certificate(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
    )
}

/// The host that `url` sends a password to in clear text, when it is not this machine
/// (`redis://` with a password, a host other than loopback); `None` otherwise.
pub(crate) fn clear_password_host(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    if u.scheme() != "redis" || (u.password().is_none() && u.username().is_empty()) {
        return None;
    }
    let host = u.host()?;
    // A `redis://` URL's host is a domain to the url crate, IPv4 addresses included.
    let loopback = match &host {
        url::Host::Domain(d) => {
            *d == "localhost"
                || d.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    (!loopback).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_password_in_clear_beyond_this_machine_is_named() {
        assert_eq!(
            clear_password_host("redis://:pw@10.0.0.5:6379").as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(
            clear_password_host("redis://user:pw@bbb1.example.com").as_deref(),
            Some("bbb1.example.com")
        );
        for quiet in [
            "redis://:pw@127.0.0.1:6379",
            "redis://:pw@localhost",
            "redis://:pw@[::1]:6379",
            "redis://10.0.0.5:6379",
            "rediss://:pw@10.0.0.5:6379",
            "unix:///run/redis.sock",
            "not a url",
        ] {
            assert_eq!(clear_password_host(quiet), None, "{quiet}");
        }
    }
}

//! Clients of Redis whose connections notice a dead peer (the sources' subscribers and the
//! store, [`crate::store_conn`]), over TLS for `rediss://` URLs ([`tls`]).

mod tls;

pub(crate) use tls::{
    Ca, certificate_failure, certificates, clear_password_host, install_provider,
};

use std::time::Duration;

use redis::io::tcp::{TcpSettings, socket2::TcpKeepalive};

/// The TCP settings of every connection: TCP keepalive probes and a user timeout, so that a
/// silently dead peer (no RST after a partition or a reboot) is noticed within about a
/// minute. Without them a quiet pub/sub connection could wait forever.
pub(crate) fn tcp_settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(30))
        .with_interval(Duration::from_secs(10));
    TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
        .set_user_timeout(Duration::from_secs(60))
}

/// `redis_client`, a `rediss://` URL's server verified against the CAs of `ca_file` when
/// given.
///
/// # Errors
/// When the URL is unusable, or the file cannot be read or holds no certificate.
pub(crate) fn redis_client_verified(
    url: &str,
    ca_file: Option<&std::path::Path>,
) -> redis::RedisResult<redis::Client> {
    let ca = ca_file.map(tls::Ca::read).transpose().map_err(|e| {
        redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "ca_file",
            e.to_string(),
        ))
    })?;
    redis_client_trusting(url, ca.as_ref())
}

/// `redis_client`, a `rediss://` URL's server verified against `ca` (PEM certificates)
/// when given, else against the system's roots.
pub(crate) fn redis_client_trusting(
    url: &str,
    ca: Option<&tls::Ca>,
) -> redis::RedisResult<redis::Client> {
    use redis::IntoConnectionInfo;
    redis_client_trusting_info(url.into_connection_info()?, ca)
}

/// [`redis_client_trusting`] of a connection's parsed settings.
pub(crate) fn redis_client_trusting_info(
    info: redis::ConnectionInfo,
    ca: Option<&tls::Ca>,
) -> redis::RedisResult<redis::Client> {
    tls::client(info.set_tcp_settings(tcp_settings()), ca)
}

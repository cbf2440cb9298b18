//! Clients of Redis whose connections notice a dead peer (the sources' subscribers and the
//! store, [`crate::store_conn`]).

use std::time::Duration;

/// A Redis client whose connections notice a silently dead peer (no RST after a partition or a
/// reboot) within about a minute: TCP keepalive probes and a user timeout. Without them a quiet
/// pub/sub connection could wait forever.
pub fn redis_client(url: &str) -> redis::RedisResult<redis::Client> {
    use redis::{
        IntoConnectionInfo,
        io::tcp::{TcpSettings, socket2::TcpKeepalive},
    };
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(30))
        .with_interval(Duration::from_secs(10));
    let tcp = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
        .set_user_timeout(Duration::from_secs(60));
    redis::Client::open(url.into_connection_info()?.set_tcp_settings(tcp))
}

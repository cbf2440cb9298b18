//! Connections to Redis: a client whose connections notice a dead peer, and a connection
//! manager made once Redis answers.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio_util::sync::CancellationToken;

use crate::shutdown::retry_until_ok;

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

/// Connects to Redis, waiting (with backoff) until it answers or the relay stops.
pub async fn connect(
    client: &redis::Client,
    token: &CancellationToken,
) -> Option<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(2));
    retry_until_ok(token, "connect to Redis", || {
        ConnectionManager::new_with_config(client.clone(), config.clone())
    })
    .await
}

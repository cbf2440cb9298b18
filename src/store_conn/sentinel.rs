//! With Redis Sentinel: the client of the sentinels (and of the master they name, with its
//! password, database and TLS from `store.url`), and the connection to the master they name.

use redis::{
    IntoConnectionInfo, RedisResult,
    aio::ConnectionManager,
    sentinel::{SentinelClient, SentinelServerType},
};

use super::{Current, manager_config};
use crate::redis_conn::Ca;

/// A client of the sentinels of `store` and of the master they name, each `rediss://` one
/// verified against `ca`; the first sentinel URL's password and user are the sentinels'.
pub(super) fn sentinel_trusting(
    store: &crate::config::StoreConfig,
    ca: &Ca,
) -> RedisResult<SentinelClient> {
    use redis::sentinel::SentinelClientBuilder;
    crate::redis_conn::install_provider();
    let infos = store
        .sentinels
        .iter()
        .map(|u| u.expose().into_connection_info())
        .collect::<RedisResult<Vec<_>>>()?;
    let addrs = infos.iter().map(|i| i.addr().clone());
    let mut b =
        SentinelClientBuilder::new(addrs, &store.sentinel_master, SentinelServerType::Master)?
            .set_client_to_sentinel_tcp_settings(crate::redis_conn::tcp_settings())
            .set_client_to_redis_tcp_settings(crate::redis_conn::tcp_settings());
    if infos
        .iter()
        .any(|i| matches!(i.addr(), redis::ConnectionAddr::TcpTls { .. }))
    {
        b = b.set_client_to_sentinel_certificates(crate::redis_conn::certificates(ca));
    }
    if let Some(first) = infos.first() {
        let s = first.redis_settings();
        if let Some(p) = s.password() {
            b = b.set_client_to_sentinel_password(p);
        }
        if let Some(u) = s.username() {
            b = b.set_client_to_sentinel_username(u);
        }
    }
    if let Some(url) = &store.url {
        let info = url.expose().into_connection_info()?;
        let s = info.redis_settings();
        if let Some(p) = s.password() {
            b = b.set_client_to_redis_password(p);
        }
        if let Some(u) = s.username() {
            b = b.set_client_to_redis_username(u);
        }
        b = b.set_client_to_redis_db(s.db());
        if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
            b = b
                .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                .set_client_to_redis_certificates(crate::redis_conn::certificates(ca));
        }
    }
    b.build()
}

/// Asks the sentinels for the master and connects to it.
pub(super) async fn master(client: &mut SentinelClient) -> RedisResult<Current> {
    let client = client.async_get_client().await?;
    let conn = ConnectionManager::new_with_config(client.clone(), manager_config()).await?;
    Ok(Current { conn, client })
}

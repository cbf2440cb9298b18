//! Before the relay connects anywhere: each `rediss://` server's certificate is checked once
//! (one that does not verify stops the start, in one line naming the key and the address:
//! a relay that waited for it would wait forever), and each password that would go in clear
//! text to a Redis beyond this machine is warned of.

use std::time::Duration;

use crate::{
    config::{Config, RedisEndpoint},
    redis_conn::{certificate_failure, clear_password_host, redis_client_verified},
};

/// How long one check may take; a server that does not answer in time is not refused (the
/// relay waits for an unreachable Redis, as always).
const CHECK_WITHIN: Duration = Duration::from_secs(5);

/// Warns of clear-text passwords, then checks every `rediss://` server's certificate.
///
/// # Errors
/// The first server whose certificate does not verify: its key, its address, the CAs it was
/// checked against and why.
pub(crate) async fn check(config: &Config) -> anyhow::Result<()> {
    let endpoints = config.redis_endpoints();
    for e in &endpoints {
        if let Some(host) = clear_password_host(e.url.expose()) {
            tracing::warn!(
                key = %e.key,
                host,
                "a Redis password goes in clear text to another machine: use rediss:// (docs/security.md)"
            );
        }
    }
    let checks = endpoints
        .iter()
        .filter(|e| e.url.expose().starts_with("rediss://"))
        .map(verify);
    match futures_util::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .next()
    {
        Some(refusal) => Err(anyhow::anyhow!(refusal)),
        None => Ok(()),
    }
}

/// Why `e`'s server is refused, when its certificate does not verify.
async fn verify(e: &RedisEndpoint<'_>) -> Option<String> {
    let ca = e.ca_file.as_ref().map(|(_, path)| *path);
    let against = match &e.ca_file {
        Some((key, path)) => format!("{key} ({})", path.display()),
        None => "the system's roots".into(),
    };
    let address = url::Url::parse(e.url.expose())
        .ok()
        .map(|u| {
            let host = u.host_str().unwrap_or_default().to_string();
            u.port().map_or(host.clone(), |p| format!("{host}:{p}"))
        })
        .unwrap_or_default();
    let client = match redis_client_verified(e.url.expose(), ca) {
        Ok(c) => c,
        Err(err) => return Some(format!("{}: {err}", e.key)),
    };
    let tried = tokio::time::timeout(CHECK_WITHIN, client.get_multiplexed_async_connection());
    match tried.await {
        Ok(Err(err)) => certificate_failure(&err).map(|why| {
            format!(
                "{} ({address}): the server's certificate does not verify against {against}: {why}",
                e.key
            )
        }),
        _ => None,
    }
}

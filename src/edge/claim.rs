//! The edge's claim on its server's name in the pool's store: one edge per name, so that two
//! servers never write one stream. The claim names the host and the outbox's life, so an edge
//! restarted on its server (a kill -9, then a start within a second) takes its own claim back
//! at once, and another server's edge given the same name is refused.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::base::redis_keys::{EDGES, EdgeKeys};

/// How long a claim lasts unrenewed.
const CLAIM_MS: u64 = 15_000;
/// How often it is renewed.
const RENEW: Duration = Duration::from_secs(5);

/// Takes or renews the claim: `Ok(None)` when it is ours, `Ok(Some(other))` when another
/// edge holds it.
const TAKE: &str = r"
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ''
end
return v
";

/// Gives the claim up, if it is still ours.
const GIVE_UP: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// The claim of `server`'s name by the edge `me` (`<host> outbox <epoch>`).
pub(super) struct Claim {
    pub(super) pool: redis::Client,
    pub(super) server: String,
    pub(super) keys: EdgeKeys,
    pub(super) me: String,
}

/// Why the edge cannot run under its name.
#[derive(Debug, thiserror::Error)]
#[error(
    "edge.server {server:?} is taken by another running edge ({other}); this edge is {me}: give one of them another edge.server"
)]
pub(super) struct Taken {
    server: String,
    other: String,
    me: String,
}

impl Claim {
    /// One try: `Err` when another edge holds the name; a store that cannot be reached is
    /// not a reason to stop (the edge keeps the messages meanwhile).
    pub(super) async fn take(&self) -> Result<(), Taken> {
        let tried = tokio::time::timeout(Duration::from_secs(3), self.try_take()).await;
        match tried {
            Ok(Ok(Some(other))) => Err(Taken {
                server: self.server.clone(),
                other,
                me: self.me.clone(),
            }),
            Ok(Ok(None)) => Ok(()),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "cannot claim the edge's name now");
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    async fn give_up(&self) -> redis::RedisResult<()> {
        let mut c = self.pool.get_multiplexed_async_connection().await?;
        let _: i64 = redis::Script::new(GIVE_UP)
            .key(&self.keys.claim)
            .arg(&self.me)
            .invoke_async(&mut c)
            .await?;
        Ok(())
    }

    async fn try_take(&self) -> redis::RedisResult<Option<String>> {
        let mut c = self.pool.get_multiplexed_async_connection().await?;
        let held: String = redis::Script::new(TAKE)
            .key(&self.keys.claim)
            .arg(&self.me)
            .arg(CLAIM_MS)
            .invoke_async(&mut c)
            .await?;
        if !held.is_empty() {
            return Ok(Some(held));
        }
        let _: i64 = redis::cmd("SADD")
            .arg(EDGES)
            .arg(&self.server)
            .query_async(&mut c)
            .await?;
        Ok(None)
    }

    /// Renews the claim until `token` is cancelled, then gives it up (a stopped edge shows as
    /// stopped at once); when another edge holds it, stops the edge with why.
    pub(super) async fn hold(
        self,
        token: CancellationToken,
        lost: tokio::sync::oneshot::Sender<Taken>,
    ) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(RENEW) => {}
                () = token.cancelled() => {
                    let given = tokio::time::timeout(Duration::from_secs(2), self.give_up()).await;
                    if !matches!(given, Ok(Ok(()))) {
                        tracing::debug!("cannot give the edge's name up: it lapses within 15 s");
                    }
                    return;
                }
            }
            if let Err(taken) = self.take().await {
                tracing::error!("{taken}");
                let _ = lost.send(taken);
                token.cancel();
                return;
            }
        }
    }
}

//! Delivery spread over the instances: each hook's callbacks are sent by the one instance that
//! holds the hook's delivery lease ([`lease_key`], a [`Lease`] like the fleet's). Every
//! instance says it is alive in a sorted set scored by when that stops being true (by the
//! store's clock), counts the live ones, and aims at `ceil(hooks / instances)` leases. Whoever
//! writes a hook's queue announces on [`QUEUED_CHANNEL`] how far it now goes, so that its
//! deliverer reads it.

use crate::base::ids::HookId;

use std::time::Duration;

use futures_util::future::join_all;
use redis::AsyncCommands;

use super::lease::Lease;
pub(crate) use crate::base::redis_keys::lease_key;
use crate::store_conn::StoreConn;

/// The sorted set of live instances: member the instance, score until when it is alive (ms).
pub(crate) const MEMBERS_KEY: &str = "hookrelay:fleet:members";
/// The store channel on which the queue writer announces new entries: `id:ts:n` per hook,
/// separated by spaces (the hook's queue now reaches id `ts`; `n` entries were added).
pub(crate) const QUEUED_CHANNEL: &str = "hookrelay:queued";

/// The delivery lease of hook `id` as held by `owner`.
pub(crate) fn hook_lease(id: HookId, owner: &str, ttl: Duration) -> Lease {
    Lease::new(lease_key(id), owner, ttl)
}

/// How many leases each of `instances` live instances aims at with `hooks` hooks.
pub(crate) fn target(hooks: usize, instances: usize) -> usize {
    hooks.div_ceil(instances.max(1))
}

/// Writes `ARGV[1]` into the members (KEYS[1]) as alive for `ARGV[2]` ms more, removes those
/// whose time ran out and counts the rest, all by the store's clock (`TIME`), so that the
/// instances' clocks need not agree.
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now))
return redis.call('ZCARD', KEYS[1])
";

/// Says that `instance` is alive for `ttl` more, forgets the instances whose time ran out, and
/// returns how many are alive (this one included).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn heartbeat(
    conn: &mut StoreConn,
    instance: &str,
    ttl: Duration,
) -> redis::RedisResult<usize> {
    static SCRIPT: std::sync::LazyLock<redis::Script> =
        std::sync::LazyLock::new(|| redis::Script::new(HEARTBEAT));
    let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let alive: usize = SCRIPT
        .key(MEMBERS_KEY)
        .arg(instance)
        .arg(ttl)
        .invoke_async(conn)
        .await?;
    Ok(alive.max(1))
}

/// Says that `instance` leaves (a clean stop).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn leave(conn: &mut StoreConn, instance: &str) -> redis::RedisResult<()> {
    conn.zrem(MEMBERS_KEY, instance).await
}

/// Renews `leases` (at once: one round trip on the multiplexed connection); each then says
/// whether it is still held ([`Lease::is_held`]). An error leaves one as it was: held until its
/// time runs out.
pub(crate) async fn renew_all<'a>(conn: &StoreConn, leases: impl IntoIterator<Item = &'a Lease>) {
    join_all(leases.into_iter().map(|l| {
        let mut c = conn.clone();
        async move {
            if let Err(e) = l.renew(&mut c).await {
                tracing::debug!(error = %e, "cannot renew a delivery lease; it holds until it runs out");
            }
        }
    }))
    .await;
}

/// Tries to take the delivery leases of `ids` for `owner`; returns those taken.
pub(crate) async fn take(
    conn: &StoreConn,
    ids: &[HookId],
    owner: &str,
    ttl: Duration,
) -> Vec<(HookId, Lease)> {
    let tried = join_all(ids.iter().map(|&id| {
        let mut c = conn.clone();
        async move {
            let lease = hook_lease(id, owner, ttl);
            match lease.try_take(&mut c).await {
                Ok(true) => Some((id, lease)),
                Ok(false) => None,
                Err(e) => {
                    tracing::debug!(hook_id = id.0, error = %e, "cannot ask for a delivery lease");
                    None
                }
            }
        }
    }))
    .await;
    tried.into_iter().flatten().collect()
}

/// Parses an announcement of [`QUEUED_CHANNEL`]: `(hook, last id, entries added)`; parts that
/// are not of that form are skipped.
pub(crate) fn parse_queued(text: &str) -> Vec<(HookId, u64, usize)> {
    text.split_ascii_whitespace()
        .filter_map(|part| {
            let mut it = part.split(':');
            let id = it.next()?.parse().ok()?;
            let ts = it.next()?.parse().ok()?;
            let n = it.next().and_then(|n| n.parse().ok()).unwrap_or(1);
            Some((id, ts, n))
        })
        .collect()
}

/// Writes an announcement of [`QUEUED_CHANNEL`].
pub(crate) fn format_queued(items: impl IntoIterator<Item = (HookId, u64, usize)>) -> String {
    let mut out = String::new();
    for (id, ts, n) in items {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!("{id}:{ts}:{n}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_up_so_that_every_hook_has_room() {
        assert_eq!(target(0, 3), 0);
        assert_eq!(target(1, 3), 1);
        assert_eq!(target(6, 3), 2);
        assert_eq!(target(7, 3), 3);
        assert_eq!(target(7, 0), 7, "no instance counted yet: this one");
    }

    #[test]
    fn announcements_read_back_what_was_written() {
        let text = format_queued([(HookId(1), 1700, 3), (HookId(42), 1701, 1)]);
        assert_eq!(text, "1:1700:3 42:1701:1");
        assert_eq!(
            parse_queued(&text),
            [(HookId(1), 1700, 3), (HookId(42), 1701, 1)]
        );
        assert_eq!(
            parse_queued("x 7:9 8:y:1 9:10:z"),
            [(HookId(7), 9, 1), (HookId(9), 10, 1)],
            "bad parts skipped, a missing count is one"
        );
        assert_eq!(
            lease_key(HookId(5)),
            "{bigbluebutton:webhooks:out:hook:5}:lease"
        );
    }
}

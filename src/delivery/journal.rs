//! The durable side of the per-hook queues: one Redis stream per hook whose entry ids are the
//! callbacks' timestamps (`<ms>-0`, strictly increasing across the relay). Entries are appended
//! in one pipeline per batch of bus messages (with that batch's id mapping changes) before they
//! are handed to the workers, and removed after a 2xx; at start-up every stream is read back in
//! order.

use std::sync::{Arc, LazyLock};

use redis::{
    AsyncCommands, ErrorKind, Script, ServerErrorKind, aio::ConnectionManager,
    streams::StreamRangeReply,
};

use crate::{
    base::redis_keys::{QUEUE_PREFIX, queue_hook_id, queue_key},
    event::Payload,
};

/// One callback waiting for its hook.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The callback's `timestamp`, also its stream entry id.
    pub ts: u64,
    /// The processed or raw event text for this hook.
    pub payload: Arc<Payload>,
    /// For logs and metrics.
    pub event_id: Arc<str>,
    /// When its bus message arrived; `None` for entries read back after a restart.
    pub arrived: Option<std::time::Instant>,
}

/// Adds one entry unless the stream already has it (or a later one): 1 when added, 0 when not.
/// A retried append after a lost reply must not fail on the entries the first attempt did write.
const XADD_ONCE: &str = r"
local r = redis.pcall('XADD', KEYS[1], ARGV[1], 'e', ARGV[2], 'p', ARGV[3])
if type(r) == 'table' and r.err then
  if string.find(r.err, 'equal or smaller', 1, true) then return 0 end
  return r
end
return 1
";

/// The script, loaded once per Redis server and then called by its SHA1 (`EVALSHA`).
static XADD_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(XADD_ONCE));

/// Sends `state` (commands whose replies are ignored, e.g. id mapping changes) and appends
/// `entries` (`(hook id, entry)` in order) in one pipeline. Everything in it is idempotent, so
/// after an error the same call is simply made again. Returns the entries that were not added
/// because their hook's stream already holds that id or a later one (a batch sent again after a
/// lost reply, or a clock that went back).
///
/// # Errors
/// When Redis fails; nothing may be assumed written then.
pub async fn append(
    conn: &mut ConnectionManager,
    state: &redis::Pipeline,
    entries: &[(u64, Entry)],
) -> Result<Vec<(u64, u64)>, redis::RedisError> {
    if entries.is_empty() && state.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = state.clone();
    for (hook, e) in entries {
        pipe.cmd("EVALSHA")
            .arg(XADD_SCRIPT.get_hash())
            .arg(1)
            .arg(queue_key(*hook))
            .arg(format!("{}-0", e.ts))
            .arg(&*e.event_id)
            .arg(e.payload.text());
    }
    let added: Vec<i64> = match pipe.query_async(conn).await {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // A new or restarted Redis: load the script, then send everything again.
            XADD_SCRIPT.load_async(conn).await?;
            pipe.query_async(conn).await?
        }
        other => other?,
    };
    Ok(entries
        .iter()
        .zip(added)
        .filter(|(_, added)| *added == 0)
        .map(|((hook, e), _)| (*hook, e.ts))
        .collect())
}

/// The highest timestamp a hook's stream has ever held (its last generated id), so that new
/// entries are given later ones even when the stream is empty now.
///
/// # Errors
/// When Redis fails.
pub async fn last_ts(conn: &mut ConnectionManager, hook: u64) -> Result<u64, redis::RedisError> {
    let key = queue_key(hook);
    let exists: bool = conn.exists(&key).await?;
    if !exists {
        return Ok(0);
    }
    let info: redis::streams::StreamInfoStreamReply = conn.xinfo_stream(&key).await?;
    Ok(info
        .last_generated_id
        .split('-')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0))
}

/// Removes delivered or dropped entries of one hook.
///
/// # Errors
/// When Redis fails.
pub async fn remove(
    conn: &mut ConnectionManager,
    hook: u64,
    timestamps: &[u64],
) -> Result<(), redis::RedisError> {
    if timestamps.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = timestamps.iter().map(|t| format!("{t}-0")).collect();
    conn.xdel(queue_key(hook), &ids).await
}

/// Deletes a hook's whole stream.
///
/// # Errors
/// When Redis fails.
pub async fn delete(conn: &mut ConnectionManager, hook: u64) -> Result<(), redis::RedisError> {
    conn.del(queue_key(hook)).await
}

/// Reads a hook's stream back, oldest first.
///
/// # Errors
/// When Redis fails.
pub async fn load(
    conn: &mut ConnectionManager,
    hook: u64,
) -> Result<Vec<Entry>, redis::RedisError> {
    let reply: StreamRangeReply = conn.xrange_all(queue_key(hook)).await?;
    Ok(reply
        .ids
        .into_iter()
        .filter_map(|sid| {
            let ts = sid.id.split('-').next()?.parse().ok()?;
            let text: String = sid.get("p")?;
            let event_id: String = sid.get("e").unwrap_or_default();
            Some(Entry {
                ts,
                payload: Arc::new(Payload::new(text)),
                event_id: event_id.into(),
                arrived: None,
            })
        })
        .collect())
}

/// Deletes the streams of hooks that no longer exist (left behind by a crash between removing a
/// hook and its queue); returns how many.
///
/// # Errors
/// When Redis fails.
pub async fn remove_orphans(
    conn: &mut ConnectionManager,
    live: impl Fn(u64) -> bool + Sync,
) -> Result<usize, redis::RedisError> {
    let keys: Vec<String> = {
        let mut iter: redis::AsyncIter<String> =
            conn.scan_match(format!("{QUEUE_PREFIX}*")).await?;
        let mut v = Vec::new();
        while let Some(k) = futures_util::StreamExt::next(&mut iter).await {
            v.push(k?);
        }
        v
    };
    let orphans: Vec<&String> = keys
        .iter()
        .filter(|k| queue_hook_id(k).is_none_or(|id| !live(id)))
        .collect();
    if !orphans.is_empty() {
        let _: () = conn.del(&orphans).await?;
    }
    Ok(orphans.len())
}

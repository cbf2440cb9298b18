//! Removes the streams of hooks whose queue has been empty and idle for a while, so that a
//! fan-out to thousands of hooks leaves no empty stream behind each (about 280 bytes of Redis
//! apiece). A stream keeps its last id while it exists, which refuses a batch written again
//! after a lost reply; after ten idle minutes no such batch can come, and the next callback of
//! the hook makes the stream again.

use crate::base::ids::HookId;

use std::time::Duration;

use redis::Script;

use crate::{
    base::redis_keys::{cursor_key, queue_key},
    store_conn::StoreConn,
};

/// How long a queue stays empty and without a new entry before its stream goes.
pub const IDLE: Duration = Duration::from_secs(600);

/// Deletes stream KEYS[1] and its cursor KEYS[2] if no entry waits after the cursor and its
/// last id (a callback timestamp, ms) is more than ARGV[1] ms old by the store's clock.
/// 1: deleted.
const DROP_IF_IDLE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local at = redis.call('HGET', KEYS[2], 'd')
local from = '-'
if at then from = '(' .. at .. '-0' end
if #redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 1) > 0 then return 0 end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local last = nil
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then last = info[i + 1] end
end
if not last then return 0 end
local ms = tonumber(string.match(last, '^(%d+)'))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ms and now - ms > tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
return 0
";

/// Removes the empty, idle streams among those of `hooks`; how many went.
///
/// # Errors
/// When Redis fails.
pub async fn drop_idle(
    conn: &mut StoreConn,
    hooks: &[HookId],
    idle: Duration,
) -> redis::RedisResult<usize> {
    static SCRIPT: std::sync::LazyLock<Script> =
        std::sync::LazyLock::new(|| Script::new(DROP_IF_IDLE));
    let idle = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let mut dropped = 0;
    for chunk in hooks.chunks(500) {
        // Loaded once per server; EVALSHA in a pipeline after that.
        SCRIPT.load_async(conn).await?;
        let mut pipe = redis::pipe();
        for id in chunk {
            super::journal::evalsha(&mut pipe, &SCRIPT, &[queue_key(*id), cursor_key(*id)])
                .arg(idle);
        }
        let done: Vec<i64> = pipe.query_async(conn).await?;
        dropped += done.iter().filter(|d| **d == 1).count();
    }
    Ok(dropped)
}

//! The journal's Lua scripts and how they are sent: each loaded once per Redis server and
//! then called by its SHA1, loaded again after a `NOSCRIPT` (every call may be repeated).

use std::sync::LazyLock;

use redis::{ErrorKind, Script, ServerErrorKind};

use crate::{
    base::{ids::RecordRef, redis_keys::PAYLOAD_PREFIX},
    store_conn::StoreConn,
};

/// Removes entries (ARGV: record prefix, then id and reference pairs, '' for none), releasing
/// the record of each entry actually removed, so that a repeated call releases nothing twice.
const REMOVE: &str = r"
local gone = 0
for i = 2, #ARGV, 2 do
  if redis.call('XDEL', KEYS[1], ARGV[i]) == 1 then
    gone = gone + 1
    if ARGV[i + 1] ~= '' then
      local k = ARGV[1] .. ARGV[i + 1]
      if redis.call('HINCRBY', k, 'n', -1) <= 0 then redis.call('DEL', k) end
    end
  end
end
return gone
";

/// Removes the delivered entries of several hooks at once (KEYS: their streams; ARGV: record
/// prefix, then per hook the number of its entries followed by their id and reference pairs),
/// releasing each record once per entry actually removed, with one HINCRBY per record.
const REMOVE_MANY: &str = r"
local released = {}
local a = 2
for k = 1, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  for i = 1, n do
    local id, ref = ARGV[a], ARGV[a + 1]
    a = a + 2
    if redis.call('XDEL', KEYS[k], id) == 1 and ref ~= '' then
      released[ref] = (released[ref] or 0) + 1
    end
  end
end
for ref, n in pairs(released) do
  local key = ARGV[1] .. ref
  if redis.call('HINCRBY', key, 'n', -n) <= 0 then redis.call('DEL', key) end
end
return 0
";

/// Removes up to ARGV[2] entries of a stream, oldest first, releasing their records; deletes
/// the stream once it is empty. Returns how many entries it removed (0: the stream is gone).
const DRAIN: &str = r"
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[2])
for _, e in ipairs(entries) do
  local f = e[2]
  for i = 1, #f, 2 do
    if f[i] == 's' then
      local k = ARGV[1] .. f[i + 1]
      if redis.call('HINCRBY', k, 'n', -1) <= 0 then redis.call('DEL', k) end
    end
  end
  redis.call('XDEL', KEYS[1], e[1])
end
if #entries == 0 then redis.call('DEL', KEYS[1]) end
return #entries
";

/// Releases ARGV[1] references to record KEYS[1] (entries that were never written).
const RELEASE: &str = r"
if redis.call('HINCRBY', KEYS[1], 'n', -tonumber(ARGV[1])) <= 0 then redis.call('DEL', KEYS[1]) end
return 0
";

/// The scripts, loaded once per Redis server and then called by their SHA1 (`EVALSHA`).
pub(super) static REMOVE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE));
pub(super) static REMOVE_MANY_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE_MANY));
pub(super) static DRAIN_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(DRAIN));
pub(super) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE));

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Sends `pipe`; after a `NOSCRIPT` (a new or restarted Redis) loads `scripts` and sends it
/// again: everything the journal sends may be repeated.
pub(super) async fn query_loading<T: redis::FromRedisValue>(
    conn: &mut StoreConn,
    pipe: &redis::Pipeline,
    scripts: &[&Script],
) -> Result<T, redis::RedisError> {
    match pipe.query_async(conn).await {
        Err(e) if is_noscript(&e) => {
            for s in scripts {
                s.load_async(conn).await?;
            }
            pipe.query_async(conn).await
        }
        other => other,
    }
}

/// Adds the `EVALSHA` of `script` on `key` to `pipe`; its arguments follow.
pub(super) fn evalsha<'a>(
    pipe: &'a mut redis::Pipeline,
    script: &Script,
    key: &str,
) -> &'a mut redis::Pipeline {
    pipe.cmd("EVALSHA").arg(script.get_hash()).arg(1).arg(key)
}

pub(super) fn record_key(shared: RecordRef) -> String {
    format!("{PAYLOAD_PREFIX}{shared}")
}

//! The journal's Lua scripts and how they are sent: each loaded once per Redis server and
//! then called by its SHA1, loaded again after a `NOSCRIPT` (every call may be repeated).

use std::sync::LazyLock;

use redis::{ErrorKind, Script, ServerErrorKind};

use crate::{
    base::{ids::RecordRef, redis_keys::PAYLOAD_PREFIX},
    store_conn::StoreConn,
};

/// Removes dropped entries (KEYS: the stream and its cursor; ARGV: record prefix, then id and
/// reference pairs, '' for none), releasing the record of each entry actually removed (one
/// `HINCRBY` per record), so that a repeated call releases nothing twice. An entry at or
/// behind the cursor is left (another instance of a fleet delivered it, and released its
/// record; the trim takes it). The
/// cursor's `x` keeps the highest id removed, which tells a late mark of delivery of the same
/// entry (that other instance's) that it may be gone.
const REMOVE: &str = r"
local c = redis.call('HMGET', KEYS[2], 'd', 'x')
local at, top = tonumber(c[1] or '0'), tonumber(c[2] or '0')
local gone, top_s, released = 0, nil, {}
for i = 2, #ARGV, 2 do
  local ts_s = string.match(ARGV[i], '^(%d+)')
  local ts = tonumber(ts_s)
  if ts > at and redis.call('XDEL', KEYS[1], ARGV[i]) == 1 then
    gone = gone + 1
    if ts > top then top, top_s = ts, ts_s end
    local ref = ARGV[i + 1]
    if ref ~= '' then released[ref] = (released[ref] or 0) + 1 end
  end
end
for ref, n in pairs(released) do
  local k = ARGV[1] .. ref
  if redis.call('HINCRBY', k, 'n', -n) <= 0 then redis.call('DEL', k) end
end
if top_s then redis.call('HSET', KEYS[2], 'x', top_s) end
return gone
";

/// Marks the delivered entries of several hooks (KEYS: per hook its stream and its cursor;
/// ARGV: record prefix, then per hook the number of its entries followed by their timestamp and
/// reference pairs, oldest first). A hook's cursor is a hash: `d`, the timestamp of its last
/// delivered entry, which only moves forward and only while the stream exists (a hook drained
/// meanwhile keeps no cursor); `x`, the highest id a drop removed. An entry after `d` releases
/// its record, once per record with one HINCRBY, so that a repeated call releases nothing
/// twice; unless it is not in the stream: older than its first entry when the stream has no
/// cursor yet (a stream made again after its hook's drain), or removed by a drop (looked up
/// only when at or behind `x`). The stream is then trimmed of its whole nodes behind the
/// cursor (`MINID ~`): no entry is deleted alone, which would have Redis walk its node from
/// the start past the entries deleted before it.
const DELIVERED: &str = r"
local released = {}
local a = 2
for k = 1, #KEYS, 2 do
  local n = tonumber(ARGV[a])
  a = a + 1
  local c = redis.call('HMGET', KEYS[k + 1], 'd', 'x')
  -- A cursor goes with its stream (drain, tidy, a hook's removal): one means the stream exists.
  if c[1] or redis.call('EXISTS', KEYS[k]) == 1 then
    local at, dropped, first = tonumber(c[1] or '0'), tonumber(c[2] or '0'), 0
    if not c[1] then
      local e = redis.call('XRANGE', KEYS[k], '-', '+', 'COUNT', 1)
      first = #e > 0 and tonumber(string.match(e[1][1], '^(%d+)')) or math.huge
    end
    local top, top_s = at, nil
    for i = 1, n do
      local ts_s, ref = ARGV[a], ARGV[a + 1]
      local ts = tonumber(ts_s)
      a = a + 2
      if ts > at then
        if ts > top then top, top_s = ts, ts_s end
        if ref ~= '' and ts >= first and (ts > dropped or
            #redis.call('XRANGE', KEYS[k], ts_s .. '-0', ts_s .. '-0') == 1) then
          released[ref] = (released[ref] or 0) + 1
        end
      end
    end
    if top_s then
      redis.call('HSET', KEYS[k + 1], 'd', top_s)
      redis.call('XTRIM', KEYS[k], 'MINID', '~', top_s .. '-1')
    end
  else
    a = a + 2 * n
  end
end
for ref, n in pairs(released) do
  local key = ARGV[1] .. ref
  if redis.call('HINCRBY', key, 'n', -n) <= 0 then redis.call('DEL', key) end
end
return 0
";

/// Removes up to ARGV[2] entries after the cursor of stream KEYS[1] (its cursor: KEYS[2]),
/// oldest first, releasing their records, by moving the cursor past them; deletes the stream
/// and its cursor once nothing is left after it. Returns how many entries it removed (0: the
/// stream is gone).
const DRAIN: &str = r"
local at = redis.call('HGET', KEYS[2], 'd')
local from = '-'
if at then from = '(' .. at .. '-0' end
local entries = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', ARGV[2])
if #entries == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 0
end
local released = {}
for _, e in ipairs(entries) do
  local f = e[2]
  for i = 1, #f, 2 do
    if f[i] == 's' then released[f[i + 1]] = (released[f[i + 1]] or 0) + 1 end
  end
end
for ref, n in pairs(released) do
  local k = ARGV[1] .. ref
  if redis.call('HINCRBY', k, 'n', -n) <= 0 then redis.call('DEL', k) end
end
local last = string.match(entries[#entries][1], '^(%d+)')
redis.call('HSET', KEYS[2], 'd', last)
redis.call('XTRIM', KEYS[1], 'MINID', '~', last .. '-1')
return #entries
";

/// Where stream KEYS[1] stands (its cursor: KEYS[2]), read-only: its last generated id (''
/// without a stream), how many entries wait after the cursor, the cursor ('' for none), and
/// the first waiting entry (an `XRANGE` reply of at most one).
const HEAD: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'', 0, '', {}} end
local at = redis.call('HGET', KEYS[2], 'd')
local pending = redis.call('XLEN', KEYS[1])
local from = '-'
if at then
  from = '(' .. at .. '-0'
  pending = pending - #redis.call('XRANGE', KEYS[1], '-', at .. '-0')
else
  at = ''
end
local last = ''
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then last = info[i + 1] end
end
return {last, pending, at, redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 1)}
";

/// The id of the first entry after the cursor KEYS[2] in stream KEYS[1] ('' for none),
/// read-only: for the metrics' age of each busy queue's oldest callback, every round.
const OLDEST: &str = r"
local at = redis.call('HGET', KEYS[2], 'd')
local from = '-'
if at then from = '(' .. at .. '-0' end
local e = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 1)
if #e == 0 then return '' end
return e[1][1]
";

/// Releases ARGV[1] references to record KEYS[1] (entries that were never written).
const RELEASE: &str = r"
if redis.call('HINCRBY', KEYS[1], 'n', -tonumber(ARGV[1])) <= 0 then redis.call('DEL', KEYS[1]) end
return 0
";

/// The scripts, loaded once per Redis server and then called by their SHA1 (`EVALSHA`).
pub(super) static REMOVE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE));
pub(super) static DELIVERED_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(DELIVERED));
pub(super) static HEAD_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(HEAD));
pub(super) static OLDEST_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(OLDEST));
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

/// Adds the `EVALSHA` of `script` on `keys` to `pipe`; its arguments follow.
pub(crate) fn evalsha<'a>(
    pipe: &'a mut redis::Pipeline,
    script: &Script,
    keys: &[impl redis::ToRedisArgs],
) -> &'a mut redis::Pipeline {
    pipe.cmd("EVALSHA")
        .arg(script.get_hash())
        .arg(keys.len())
        .arg(keys)
}

pub(super) fn record_key(shared: RecordRef) -> String {
    format!("{PAYLOAD_PREFIX}{shared}")
}

/// The field of a record that holds the payload of slot `k`.
pub(super) fn slot_field(k: u16) -> std::borrow::Cow<'static, str> {
    match k {
        0 => "t".into(),
        k => format!("t{k}").into(),
    }
}

//! Sent callbacks kept a while (`delivery.retain`), to be sent again (`hookrelay redeliver`):
//! per registration (the callback URL, within its tenant: `Registration::key` in `hooks`,
//! named `url` below), so that a hook removed after failures and registered again with the
//! same URL finds them, and a tenant's never reach another tenant's hook of that URL, a Redis
//! stream of the callbacks sent to it (the payload as sent), and of those still queued when
//! its hook was removed after failures (as they were queued). A round's callbacks for a URL
//! are written as a few entries ([`group`]), each a group (LZ4-packed JSON) of callbacks with the journal's
//! fields ([`super::journal`]: `e`, `p`, `o`, and the plugin chain's `c`, `im`, `xm`, `q`,
//! `mf`), the callback's own timestamp (`r`) and its size (`z`); the group's entry has their
//! bytes (`z`). One script per URL a round then drops the oldest entries beyond the window
//! or the URL's share of bytes (`delivery.retain_max_mib`), keeping their sum beside the
//! stream. A redelivery asked for ([`Request`]) waits in the store until the instance that
//! processes the bus queues it, so that each queue keeps one writer and one clock. Reading
//! them back: [`read`].

mod group;
mod read;

pub(crate) use read::{Found, oldest_kept, read_kept, read_kept_ids};

use std::sync::LazyLock;

use redis::Script;
use serde::{Deserialize, Serialize};

use crate::{
    base::{digest::Algorithm, ids::HookId, redis_keys::REDELIVERIES, sources::SourceTable},
    delivery::journal::Entry,
    store_conn::StoreConn,
};

/// Trims what is kept for a URL once a round's entries are added (KEYS: the stream, its byte
/// count; ARGV: the most bytes, the oldest time kept in ms, the keys' expiry in ms, the bytes
/// the round added). Returns the bytes kept. The group entries themselves are plain `XADD`s
/// before it: passed through the script, each payload was copied into Lua and back, 8 µs of
/// Redis a callback (BENCHMARKS.md, issue 63). A round reads the oldest entry alone and goes
/// on only when it goes. A group goes whole, its bytes (`z`) with it.
const RETAIN: &str = r"
local used = tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(ARGV[4])
local max, oldest = tonumber(ARGV[1]), tonumber(ARGV[2])
-- The oldest entries go while the bytes are over or they are older than the window: the oldest
-- is read alone (most rounds keep it), then pages after it; those that go are trimmed at once.
local from, count, keep, last = '-', 1, nil, nil
while keep == nil do
  local page = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', count)
  if #page == 0 then break end
  for _, e in ipairs(page) do
    local ms = tonumber(string.match(e[1], '^(%d+)'))
    if used <= max and ms >= oldest then keep = e[1] break end
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'z' then used = used - tonumber(f[i + 1]) end
    end
    last = e[1]
  end
  from, count = '(' .. (last or '0-0'), 64
end
if last and keep then
  redis.call('XTRIM', KEYS[1], 'MINID', keep)
elseif last then
  redis.call('DEL', KEYS[1])
end
if used < 0 then used = 0 end
redis.call('SET', KEYS[2], used, 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return used
";

static RETAIN_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RETAIN));

/// The stream of the callbacks kept for `url`, and its byte count (one slot: the digest is
/// their hash tag).
pub(crate) fn keys(url: &str) -> (String, String) {
    let digest = Algorithm::Sha1.hex_digest(&[url.as_bytes()]);
    let stream = format!("hookrelay:retained:{{{}}}", &digest[..20]);
    let bytes = format!("{stream}:bytes");
    (stream, bytes)
}

/// The bounds of what is kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) window_ms: u64,
    pub(crate) max_bytes: u64,
}

/// Adds to `pipe` what keeps `kept` for `url`, as of `now` (ms): their group entries, then
/// the script that trims.
pub(crate) fn add(
    pipe: &mut redis::Pipeline,
    url: &str,
    kept: &[Entry],
    bounds: Bounds,
    sources: &SourceTable,
    now: u64,
) {
    let (stream, bytes) = keys(url);
    let hint = kept.iter().map(|e| e.payload.text().len() + 64).sum();
    let most = group::most_bytes(bounds.max_bytes);
    let mut groups = group::Groups::new(pipe, &stream, most, hint);
    for e in kept {
        // Borrowed, not copied: each value is written once, into the group.
        let ts = e.original_ts().to_string();
        let mut fields: Vec<(&str, &str)> =
            vec![("e", &e.event_id), ("p", e.payload.text()), ("r", &ts)];
        let name = sources.stored_name(e.source);
        if let Some(name) = name.as_deref() {
            fields.push(("o", name));
        }
        if let Some(d) = &e.chain {
            fields.push(("c", "1"));
            let optional = [
                ("im", d.internal_meeting_id.as_deref()),
                ("xm", d.external_meeting_id.as_deref()),
                ("q", d.other.as_ref().map(|p| p.text())),
                ("mf", d.meeting.as_deref()),
            ];
            fields.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        }
        groups.push(e.original_ts(), &fields);
    }
    let added = groups.finish();
    crate::delivery::journal::evalsha(pipe, &RETAIN_SCRIPT, &[&stream, &bytes])
        .arg(bounds.max_bytes)
        .arg(now.saturating_sub(bounds.window_ms))
        // Kept a little longer than the window, so that an idle URL's keys go by themselves.
        .arg(bounds.window_ms + 60_000)
        .arg(added)
        .ignore();
}

/// Sends a pipeline made with [`add`]. When Redis does not have the script (restarted, or
/// failed over), the entries were added: the script is loaded and the trims alone are sent
/// again, so that nothing is kept twice.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn send(
    conn: &StoreConn,
    pipe: &redis::Pipeline,
) -> Result<(), redis::RedisError> {
    let mut c = conn.clone();
    match pipe.query_async::<()>(&mut c).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            RETAIN_SCRIPT.load_async(&mut c).await?;
            let mut trims = redis::pipe();
            for cmd in pipe.cmd_iter() {
                let first = cmd.args_iter().next();
                if matches!(first, Some(redis::Arg::Simple(name)) if name == b"EVALSHA") {
                    trims.add_command(cmd.clone()).ignore();
                }
            }
            trims.query_async(&mut c).await
        }
        other => other,
    }
}

/// A redelivery asked for: the kept callbacks `ids` of `url` to queue again for `hook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) hook: HookId,
    pub(crate) url: String,
    pub(crate) ids: Vec<String>,
}

/// Asks for a redelivery; the instance that processes the bus queues it.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn ask_redelivery(
    conn: &StoreConn,
    request: &Request,
) -> Result<(), redis::RedisError> {
    super::inbox::put(conn, REDELIVERIES, request).await
}

/// The oldest redeliveries asked for, up to `n`, oldest first; they stay asked for until
/// [`redeliveries_taken`] (a crash in between queues them again: at least once).
///
/// # Errors
/// When Redis fails. A record that does not parse is skipped (and dropped by [`redeliveries_taken`]).
pub(crate) async fn redeliveries_asked(
    conn: &StoreConn,
    n: usize,
) -> Result<Vec<Option<Request>>, redis::RedisError> {
    super::inbox::oldest(conn, REDELIVERIES, n).await
}

/// Removes the `n` oldest redeliveries asked for (those [`redeliveries_asked`] gave).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn redeliveries_taken(
    conn: &StoreConn,
    n: usize,
) -> Result<(), redis::RedisError> {
    super::inbox::drop_oldest(conn, REDELIVERIES, n).await
}

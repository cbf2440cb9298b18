//! Reading the queues back: where each hook's stream stands, its entries page by page, and
//! the shared payload records they refer to.

use std::sync::Arc;

use redis::AsyncCommands;

use super::scripts::{HEAD_SCRIPT, OLDEST_SCRIPT, evalsha, query_loading, record_key, slot_field};
use crate::{
    base::{
        ids::{HookId, RecordRef},
        redis_keys::{PAYLOAD_SEQ, cursor_key, queue_key},
    },
    event::Payload,
    plugin_host::Deferred,
    store_conn::StoreConn,
};

/// Where a hook's stream stands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Position {
    /// The highest timestamp it ever held (its last generated id), so that new entries are
    /// given later ones even when it is empty now; 0 without a stream.
    pub last_ts: u64,
    /// Entries waiting in it: those after its cursor.
    pub length: usize,
    /// Its cursor: the timestamp of its last delivered entry, which the entries waiting come
    /// after; 0 for none.
    pub delivered: u64,
}

impl Position {
    /// What the waiting entries come after (`None`: the whole stream waits).
    pub fn after(&self) -> Option<u64> {
        (self.delivered > 0).then_some(self.delivered)
    }
}

/// Where a hook's queue stands, and the timestamp of its oldest waiting callback.
#[derive(Debug, Clone, Copy, Default)]
pub struct Head {
    pub position: Position,
    pub oldest: Option<u64>,
}

/// Where hook `hook`'s stream stands.
///
/// # Errors
/// When Redis fails.
pub async fn position(conn: &mut StoreConn, hook: HookId) -> Result<Position, redis::RedisError> {
    let heads = heads(conn, &[hook]).await?;
    Ok(heads.first().map(|h| h.position).unwrap_or_default())
}

/// Where the queues of `hooks` stand, in their order, read in one pipeline.
///
/// # Errors
/// When Redis fails.
pub async fn heads(conn: &mut StoreConn, hooks: &[HookId]) -> Result<Vec<Head>, redis::RedisError> {
    type Reply = (String, usize, String, redis::streams::StreamRangeReply);
    let replies: Vec<Reply> = per_hook(conn, &HEAD_SCRIPT, hooks).await?;
    Ok(replies
        .into_iter()
        .map(|(last, length, cursor, first)| Head {
            position: Position {
                last_ts: parse_ts(&last).unwrap_or(0),
                length,
                delivered: cursor.parse().unwrap_or(0),
            },
            oldest: first.ids.first().and_then(|e| parse_ts(&e.id)),
        })
        .collect())
}

/// The timestamp of the oldest callback waiting for each of `hooks` (`None`: none), in one
/// pipeline; lighter than [`heads`], which also counts them.
///
/// # Errors
/// When Redis fails.
pub async fn oldest(
    conn: &mut StoreConn,
    hooks: &[HookId],
) -> Result<Vec<Option<u64>>, redis::RedisError> {
    let ids: Vec<String> = per_hook(conn, &OLDEST_SCRIPT, hooks).await?;
    Ok(ids.iter().map(|id| parse_ts(id)).collect())
}

/// Calls the read-only `script` on each of `hooks`' stream and cursor, in one pipeline; the
/// replies in their order.
async fn per_hook<T: redis::FromRedisValue>(
    conn: &mut StoreConn,
    script: &redis::Script,
    hooks: &[HookId],
) -> Result<Vec<T>, redis::RedisError> {
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for &h in hooks {
        evalsha(&mut pipe, script, &[queue_key(h), cursor_key(h)]);
    }
    query_loading(conn, &pipe, &[script]).await
}

/// Where the stream `key` stands, without a cursor (a stream of an earlier version's name):
/// its whole length waits.
///
/// # Errors
/// When Redis fails.
pub async fn position_of(conn: &mut StoreConn, key: &str) -> Result<Position, redis::RedisError> {
    let exists: bool = conn.exists(key).await?;
    if !exists {
        return Ok(Position::default());
    }
    let info: redis::streams::StreamInfoStreamReply = conn.xinfo_stream(key).await?;
    Ok(Position {
        last_ts: parse_ts(&info.last_generated_id).unwrap_or(0),
        length: info.length,
        delivered: 0,
    })
}

/// The highest shared record reference ever written.
///
/// # Errors
/// When Redis fails.
pub async fn last_shared(conn: &mut StoreConn) -> Result<RecordRef, redis::RedisError> {
    let v: Option<RecordRef> = conn.get(PAYLOAD_SEQ).await?;
    Ok(v.unwrap_or_default())
}

/// The millisecond part of a stream id.
pub fn parse_ts(id: &str) -> Option<u64> {
    id.split('-').next()?.parse().ok()
}

/// An entry as stored, its payload not yet resolved.
pub struct Stored {
    pub ts: u64,
    pub(crate) event_id: Arc<str>,
    pub body: StoredBody,
    /// The source's stored name; `None` for the `default` source.
    pub(crate) source: Option<String>,
    /// What the plugin chain needs, for an entry that waits for it.
    pub(crate) chain: Option<Box<Deferred>>,
    /// A redelivery's original timestamp (`r`).
    pub(crate) original: Option<u64>,
    /// Its trace context (`tp`); an unreadable one is passed over.
    pub(crate) trace: Option<crate::traces::TraceParent>,
}

impl Stored {
    /// The entry `ts` with the stored fields of `sid` (the queues' and the kept callbacks'
    /// streams store the same fields).
    pub fn from_fields(ts: u64, sid: &redis::streams::StreamId) -> Self {
        let event_id: String = sid.get("e").unwrap_or_default();
        let body = if let Some(text) = sid.get::<String>("p") {
            StoredBody::Inline(text)
        } else if let Some(s) = sid.get::<String>("s").and_then(|s| s.parse().ok()) {
            // An unreadable slot names no payload; an earlier version's entry has none (slot 0).
            match sid.get::<String>("k").map(|k| k.parse::<u16>()) {
                None => StoredBody::Shared(s, 0),
                Some(Ok(k)) => StoredBody::Shared(s, k),
                Some(Err(_)) => StoredBody::Unreadable,
            }
        } else {
            StoredBody::Unreadable
        };
        let chain = sid.contains_key("c").then(|| {
            Box::new(Deferred {
                internal_meeting_id: sid.get("im"),
                external_meeting_id: sid.get("xm"),
                other: sid.get::<String>("q").map(|t| Arc::new(Payload::new(t))),
                meeting: sid.get::<String>("mf").map(Arc::from),
            })
        });
        Self {
            ts,
            source: sid.get("o"),
            event_id: event_id.into(),
            body,
            chain,
            original: sid.get::<String>("r").and_then(|r| r.parse().ok()),
            trace: sid
                .get::<String>("tp")
                .and_then(|t| crate::traces::TraceParent::parse(&t)),
        }
    }
}

pub enum StoredBody {
    Inline(String),
    /// A shared record and its payload's slot.
    Shared(RecordRef, u16),
    /// Neither field: nothing to send.
    Unreadable,
}

/// Reads up to `count` entries of `hook`'s stream with ids after `after` (exclusive) and up to
/// `until` (inclusive), oldest first. `after` is at least the hook's cursor
/// ([`Position::after`]): `None` reads from the stream's start.
///
/// # Errors
/// When Redis fails.
pub async fn read_page(
    conn: &mut StoreConn,
    hook: HookId,
    after: Option<u64>,
    until: u64,
    count: usize,
) -> Result<Vec<Stored>, redis::RedisError> {
    let start = after.map_or("-".to_string(), |t| format!("({t}-0"));
    let reply: redis::streams::StreamRangeReply = conn
        .xrange_count(queue_key(hook), start, format!("{until}-0"), count)
        .await?;
    Ok(reply
        .ids
        .into_iter()
        .filter_map(|sid| Some(Stored::from_fields(parse_ts(&sid.id)?, &sid)))
        .collect())
}

/// The payloads at slots of shared records (`None` for a record or slot that is gone).
///
/// # Errors
/// When Redis fails.
pub async fn read_records(
    conn: &mut StoreConn,
    shared: &[super::SharedAt],
) -> Result<Vec<Option<String>>, redis::RedisError> {
    if shared.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for (s, k) in shared {
        pipe.hget(record_key(*s), slot_field(*k));
    }
    pipe.query_async(conn).await
}

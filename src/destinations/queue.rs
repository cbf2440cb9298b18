//! A destination's queue in the store: a stream of its messages in bus order, written in the
//! transaction of the batch of bus messages that made them, read by its sender a page at a
//! time, each entry removed once the broker confirmed it. The destinations' states (for
//! `hookrelay destinations`) are a hash beside them.

use redis::{AsyncCommands, streams::StreamRangeReply};

use super::message::{ForPlugins, Message};
use crate::store_conn::StoreConn;

/// Hash: each destination's state (JSON, [`State`]), by name.
pub(crate) const STATES: &str = "hookrelay:destinations";

/// The stream of destination `name`'s messages.
pub(crate) fn key(name: &str) -> String {
    format!("hookrelay:destination:{name}:queue")
}

/// Adds `m` to destination `name`'s queue in `pipe`.
pub(super) fn add(pipe: &mut redis::Pipeline, name: &str, m: &Message) {
    let queued = m.queued_ms.to_string();
    let fields: [(&str, &str); 8] = [
        ("b", &m.body),
        ("e", &m.event),
        ("m", &m.meeting),
        ("s", &m.server),
        ("n", &m.tenant),
        ("k", &m.target),
        ("i", &m.id),
        ("t", &queued),
    ];
    match &m.for_plugins {
        None => pipe.xadd(key(name), "*", &fields).ignore(),
        Some(p) => {
            let more = [
                ("x", p.internal_meeting.as_str()),
                ("f", &p.facts),
                ("o", &p.other),
            ];
            let all: Vec<(&str, &str)> = fields.iter().chain(&more).copied().collect();
            pipe.xadd(key(name), "*", &all).ignore()
        }
    };
}

/// The first `count` messages of destination `name`'s queue, with their entry ids.
///
/// # Errors
/// When Redis fails.
pub(super) async fn read(
    conn: &mut StoreConn,
    name: &str,
    count: usize,
) -> redis::RedisResult<Vec<(String, Message)>> {
    let reply: StreamRangeReply = conn.xrange_count(key(name), "-", "+", count).await?;
    Ok(reply
        .ids
        .into_iter()
        .map(|e| {
            let text = |k: &str| e.get::<String>(k).unwrap_or_default();
            let m = Message {
                body: text("b"),
                event: text("e"),
                meeting: text("m"),
                server: text("s"),
                tenant: text("n"),
                target: text("k"),
                id: text("i"),
                queued_ms: text("t").parse().unwrap_or(0),
                for_plugins: e.map.contains_key("x").then(|| ForPlugins {
                    internal_meeting: text("x"),
                    facts: text("f"),
                    other: text("o"),
                }),
            };
            (e.id, m)
        })
        .collect())
}

/// Removes a message the broker confirmed (or that it can never take).
///
/// # Errors
/// When Redis fails.
pub(super) async fn remove(conn: &mut StoreConn, name: &str, id: &str) -> redis::RedisResult<()> {
    conn.xdel::<_, _, ()>(key(name), &[id]).await
}

/// How many messages wait for destination `name`.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn depth(conn: &mut StoreConn, name: &str) -> redis::RedisResult<usize> {
    conn.xlen(key(name)).await
}

/// When the oldest waiting message of destination `name` was queued (ms), if any.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn oldest_ms(conn: &mut StoreConn, name: &str) -> redis::RedisResult<Option<u64>> {
    let reply: StreamRangeReply = conn.xrange_count(key(name), "-", "+", 1).await?;
    Ok(reply.ids.first().and_then(|e| {
        e.get::<String>("t")
            .and_then(|t| t.parse().ok())
            .or_else(|| e.id.split('-').next().and_then(|ms| ms.parse().ok()))
    }))
}

/// A destination's state, as its sender last wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct State {
    /// `ok` (publishing, or nothing to publish) or `failing`.
    pub(crate) state: String,
    /// The last failure, in one line (empty when none yet).
    pub(crate) last_error: String,
    /// When the state last changed (ms).
    pub(crate) since_ms: u64,
    /// Messages published since the relay started.
    pub(crate) published: u64,
}

/// Writes destination `name`'s state.
///
/// # Errors
/// When Redis fails.
pub(super) async fn set_state(
    conn: &mut StoreConn,
    name: &str,
    state: &State,
) -> redis::RedisResult<()> {
    let json = serde_json::to_string(state).unwrap_or_default();
    conn.hset::<_, _, _, ()>(STATES, name, json).await
}

/// Every destination's state, by name.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn states(
    conn: &mut StoreConn,
) -> redis::RedisResult<std::collections::HashMap<String, State>> {
    let all: std::collections::HashMap<String, String> = conn.hgetall(STATES).await?;
    Ok(all
        .into_iter()
        .filter_map(|(k, v)| serde_json::from_str(&v).ok().map(|s| (k, s)))
        .collect())
}

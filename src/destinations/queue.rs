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

/// The stream of the messages destination `name` published, kept for `delivery.retain` so
/// that `redeliver` can queue them again.
pub(crate) fn sent_key(name: &str) -> String {
    format!("hookrelay:destination:{name}:sent")
}

/// Adds `m` to destination `name`'s queue in `pipe`.
pub(super) fn add(pipe: &mut redis::Pipeline, name: &str, m: &Message) {
    pipe.add_command(xadd(&key(name), None, m)).ignore();
}

/// `XADD key [MINID ~ min] * <m's fields>`.
fn xadd(key: &str, min_id: Option<u64>, m: &Message) -> redis::Cmd {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(key);
    if let Some(min) = min_id {
        cmd.arg("MINID").arg("~").arg(min);
    }
    cmd.arg("*")
        .arg("b")
        .arg(&m.body)
        .arg("e")
        .arg(&m.event)
        .arg("m")
        .arg(&m.meeting)
        .arg("s")
        .arg(&m.server)
        .arg("n")
        .arg(&m.tenant)
        .arg("k")
        .arg(&m.target)
        .arg("i")
        .arg(&m.id)
        .arg("t")
        .arg(m.queued_ms);
    if let Some(p) = &m.for_plugins {
        cmd.arg("x")
            .arg(&p.internal_meeting)
            .arg("f")
            .arg(&p.facts)
            .arg("o")
            .arg(&p.other);
    }
    if let Some(t) = &m.trace {
        cmd.arg("tp").arg(t.to_string());
    }
    cmd
}

/// Takes the `finished` entries off destination `name`'s queue; each one's message the broker
/// confirmed (`Some`) is kept in its sent stream for `retain_ms` (0: not kept). One round trip.
///
/// # Errors
/// When Redis fails.
pub(super) async fn done(
    conn: &mut StoreConn,
    name: &str,
    finished: &[(&str, Option<&Message>)],
    retain_ms: u64,
) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    let entries: Vec<&str> = finished.iter().map(|(e, _)| *e).collect();
    pipe.xdel(key(name), &entries).ignore();
    if retain_ms > 0 {
        let min = crate::base::time::now_ms().saturating_sub(retain_ms);
        for m in finished.iter().filter_map(|(_, m)| *m) {
            pipe.add_command(xadd(&sent_key(name), Some(min), m))
                .ignore();
        }
    }
    pipe.query_async(conn).await
}

/// What a redelivery queued: the publish times (ms) of the messages queued again.
pub(crate) enum Requeued {
    Queued(Vec<u64>),
    /// The window holds this many, more than the most one redelivery may queue.
    TooMany(usize),
}

/// Queues again, after what destination `name` has queued, the messages it published from
/// `since` to `until` (ms) that `wanted` takes, in their order, at most `most`; each with a new
/// id (a broker that deduplicates takes it again) and queued now.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn requeue(
    conn: &mut StoreConn,
    name: &str,
    (since, until): (u64, u64),
    most: usize,
    wanted: impl Fn(&Message) -> bool,
) -> redis::RedisResult<Requeued> {
    let end = if until == u64::MAX {
        "+".to_string()
    } else {
        until.to_string()
    };
    let found = read_range(conn, &sent_key(name), &since.to_string(), &end, most + 1).await?;
    let chosen: Vec<(String, Message)> = found.into_iter().filter(|(_, m)| wanted(m)).collect();
    if chosen.len() > most {
        return Ok(Requeued::TooMany(chosen.len()));
    }
    let now = crate::base::time::now_ms();
    let mut pipe = redis::pipe();
    pipe.atomic();
    let mut times = Vec::with_capacity(chosen.len());
    for (entry, m) in &chosen {
        let again = Message {
            id: uuid::Uuid::new_v5(
                &uuid::Uuid::NAMESPACE_OID,
                format!("{}/{now}", m.id).as_bytes(),
            )
            .to_string(),
            queued_ms: now,
            // Sent again on its own: not a try of the original's trace.
            trace: None,
            ..m.clone()
        };
        pipe.add_command(xadd(&key(name), None, &again)).ignore();
        times.push(
            entry
                .split('-')
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0),
        );
    }
    if !chosen.is_empty() {
        let () = pipe.query_async(conn).await?;
    }
    Ok(Requeued::Queued(times))
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
    read_range(conn, &key(name), "-", "+", count).await
}

/// The messages of stream `key` from `start` to `end`, at most `count`, with their entry ids.
async fn read_range(
    conn: &mut StoreConn,
    key: &str,
    start: &str,
    end: &str,
    count: usize,
) -> redis::RedisResult<Vec<(String, Message)>> {
    let reply: StreamRangeReply = conn.xrange_count(key, start, end, count).await?;
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
                trace: crate::traces::TraceParent::parse(&text("tp")),
            };
            (e.id, m)
        })
        .collect())
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

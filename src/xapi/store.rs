//! The xAPI output in Redis: each meeting's state (a hash that expires, removed at the
//! meeting's end) and each LRS's queue of statements (a stream, in the order they were made).
//! Both are written with the batch of bus messages that made them, in its transaction, so a
//! statement is queued exactly when its event is processed; they are read back by a relay that
//! starts, or takes over a fleet, with nothing in memory.

use std::collections::HashMap;

use redis::{AsyncCommands, streams::StreamRangeReply};

use super::translate::{Meeting, Poll, State, Write};
use crate::store_conn::StoreConn;

/// Hash of the queues' names (one per LRS and credentials) to their LRS's host.
pub(crate) const QUEUES: &str = "hookrelay:xapi:lrs";

/// A meeting's state: `m` (the meeting, JSON), `u:<user>` (name), `p:<poll id>` (JSON),
/// `h:<user>` (`1`: hand raised).
pub(crate) fn state_key(source: &str, mid: &str) -> String {
    format!("hookrelay:xapi:state:{source}:{mid}")
}

/// One LRS's queue.
pub(crate) fn queue_key(lrs: &str) -> String {
    format!("hookrelay:xapi:queue:{lrs}")
}

/// Reads a meeting's state back; `None` when there is none.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn load(
    conn: &mut StoreConn,
    source: &str,
    mid: &str,
) -> redis::RedisResult<Option<State>> {
    let fields: HashMap<String, String> = conn.hgetall(state_key(source, mid)).await?;
    let Some(meeting) = fields
        .get("m")
        .and_then(|m| serde_json::from_str::<Meeting>(m).ok())
    else {
        return Ok(None);
    };
    let mut state = State {
        meeting,
        ..State::default()
    };
    for (k, v) in fields {
        if let Some(u) = k.strip_prefix("u:") {
            state.users.insert(u.into(), v);
        } else if let Some(p) = k.strip_prefix("p:") {
            if let Ok(poll) = serde_json::from_str::<Poll>(&v) {
                state.polls.insert(p.into(), poll);
            }
        } else if let Some(u) = k.strip_prefix("h:") {
            state.hands.insert(u.into(), v == "1");
        }
    }
    Ok(Some(state))
}

/// Adds the state changes to `pipe` (each write renews the meeting's expiry).
pub(crate) fn add_writes(pipe: &mut redis::Pipeline, source: &str, writes: &[Write], ttl_s: u64) {
    for w in writes {
        let (mid, field, value) = match w {
            Write::Forget(mid) => {
                pipe.del(state_key(source, mid)).ignore();
                continue;
            }
            Write::Meeting(mid, m) => {
                pipe.del(state_key(source, mid)).ignore();
                (
                    mid,
                    "m".to_string(),
                    serde_json::to_string(m).unwrap_or_default(),
                )
            }
            Write::User(mid, u, name) => (mid, format!("u:{u}"), name.clone()),
            Write::Poll(mid, p, poll) => (
                mid,
                format!("p:{p}"),
                serde_json::to_string(poll).unwrap_or_default(),
            ),
            Write::Hand(mid, u, up) => (mid, format!("h:{u}"), if *up { "1" } else { "0" }.into()),
        };
        let key = state_key(source, mid);
        pipe.hset(&key, field, value).ignore();
        pipe.expire(&key, i64::try_from(ttl_s).unwrap_or(i64::MAX))
            .ignore();
    }
}

/// One queued statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Queued {
    /// Its stream entry id.
    pub(super) id: String,
    pub(super) statement: String,
    /// The meeting's encrypted LRS payload; `None`: the default LRS.
    pub(super) lrs_payload: Option<String>,
    /// The source whose secret decrypts it.
    pub(super) source: Option<String>,
    /// Its place in its bus message's trace (`tp`), when traced.
    pub(super) trace: Option<crate::traces::TraceParent>,
}

/// Adds a statement to an LRS's queue in `pipe`.
pub(crate) fn add_statement(
    pipe: &mut redis::Pipeline,
    lrs: &str,
    statement: &str,
    lrs_payload: Option<&str>,
    source: &str,
    host: &str,
    trace: Option<crate::traces::TraceParent>,
) {
    let mut fields: Vec<(&str, &str)> = vec![("s", statement), ("o", source)];
    if let Some(p) = lrs_payload {
        fields.push(("t", p));
    }
    let trace = trace.map(|t| t.to_string());
    if let Some(t) = &trace {
        fields.push(("tp", t));
    }
    pipe.xadd(queue_key(lrs), "*", &fields).ignore();
    pipe.hset(QUEUES, lrs, host).ignore();
}

/// The first `count` statements of an LRS's queue.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn read(
    conn: &mut StoreConn,
    lrs: &str,
    count: usize,
) -> redis::RedisResult<Vec<Queued>> {
    let reply: StreamRangeReply = conn.xrange_count(queue_key(lrs), "-", "+", count).await?;
    Ok(reply
        .ids
        .into_iter()
        .map(|e| {
            let text = |k: &str| e.get::<String>(k);
            Queued {
                statement: text("s").unwrap_or_default(),
                lrs_payload: text("t"),
                source: text("o"),
                trace: text("tp").and_then(|t| crate::traces::TraceParent::parse(&t)),
                id: e.id,
            }
        })
        .collect())
}

/// Removes a statement the LRS took (or refused for good).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn remove(conn: &mut StoreConn, lrs: &str, id: &str) -> redis::RedisResult<()> {
    conn.xdel::<_, _, ()>(queue_key(lrs), &[id]).await
}

/// The queues: name, LRS host, length.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn queues(
    conn: &mut StoreConn,
) -> redis::RedisResult<Vec<(String, String, usize)>> {
    let names: HashMap<String, String> = conn.hgetall(QUEUES).await?;
    let mut out = Vec::with_capacity(names.len());
    for (n, host) in names {
        let len: usize = conn.xlen(queue_key(&n)).await?;
        out.push((n, host, len));
    }
    Ok(out)
}

//! Writing a batch: its shared payload records, its entries (a plain `XADD` each, with the
//! callback's timestamp as its id) and the state and commit that go with it, in one
//! transaction. A batch sent again after a lost reply is told apart from a clock that went
//! back by reading the refused ids: an entry already there was written by the first try.

use std::sync::Arc;

use redis::Value;

use super::{
    Entry, entry_id,
    scripts::{RELEASE_SCRIPT, evalsha, query_loading, record_key, slot_field},
};
use crate::{
    base::{
        ids::{HookId, RecordRef, StreamId},
        redis_keys::{PAYLOAD_SEQ, batch_mark_key, queue_key},
        sources::SourceTable,
    },
    event::Payload,
    store_conn::StoreConn,
};

/// A payload record to write with a batch: its reference, its payloads by slot and the
/// number of entries that refer to any of them.
pub struct Record<'a> {
    pub shared: RecordRef,
    pub payloads: &'a [Arc<Payload>],
    pub refs: usize,
}

/// What commits a batch: writes that must never land before its entries (the fleet's
/// cursors), and on a Redis Cluster a mark written beside each hook's entries
/// ([`crate::fleet::mark`]).
pub struct Commit {
    pub(crate) writes: redis::Pipeline,
    /// `None` off a cluster, where none is written.
    pub(crate) mark: Option<String>,
}

/// Why an entry of a batch was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Added {
    /// Its id is there already: a batch sent again after a lost reply.
    AlreadyThere,
    /// Its hook's stream holds a later id (a clock that went back): not written.
    Refused,
}

/// Sends the shared payload `records`, the `entries` (`(hook id, entry)` in order), `state`
/// (commands whose replies are ignored: id mapping changes) and `commit` in one transaction.
/// On a cluster, where a transaction holds one slot: one per slot, each hook's entries with
/// `commit`'s mark, then `commit`'s writes once they all succeeded.
/// Returns the entries not added: already there (a batch sent again after a lost reply) or
/// refused because their hook's stream holds a later id (a clock that went back; their
/// references are released).
///
/// # Errors
/// When Redis fails; the call may then be made again as it is.
pub async fn append(
    conn: &mut StoreConn,
    state: &redis::Pipeline,
    commit: Option<&Commit>,
    records: &[Record<'_>],
    entries: &[(HookId, Entry)],
    sources: &SourceTable,
) -> Result<Vec<(HookId, StreamId)>, redis::RedisError> {
    if entries.is_empty() && state.is_empty() && commit.is_none_or(|c| c.writes.is_empty()) {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    // Every reply is looked at below: an entry's id refused is an answer, not a failure.
    pipe.atomic().ignore_errors();
    for r in records {
        // Absolute values: a batch sent again writes the same record.
        let cmd = pipe.cmd("HSET").arg(record_key(r.shared));
        for (k, p) in (0u16..).zip(r.payloads) {
            cmd.arg(&*slot_field(k)).arg(p.text());
        }
        cmd.arg("n").arg(r.refs);
    }
    if let Some(last) = records.iter().map(|r| r.shared).max() {
        pipe.set(PAYLOAD_SEQ, last);
    }
    let first_entry = pipe.len();
    for (hook, e) in entries {
        add_entry(&mut pipe, &queue_key(*hook), e, sources);
    }
    for cmd in state.cmd_iter() {
        pipe.add_command(cmd.clone());
    }
    let cluster = conn.is_cluster();
    if let Some(commit) = commit {
        if cluster {
            if let Some(mark) = &commit.mark {
                add_marks(&mut pipe, entries, mark);
            }
        } else {
            for cmd in commit.writes.cmd_iter() {
                pipe.add_command(cmd.clone());
            }
        }
    }
    let replies: Vec<Value> = pipe.query_async(conn).await?;
    if replies.len() != pipe.len() {
        return Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "a batch's transaction answered a reply count other than its commands'",
        )));
    }
    // The entries whose id is not above their stream's last (sent before, or refused), in
    // the entries' order; any other error fails the call.
    let mut not_above = Vec::new();
    for (i, reply) in replies.into_iter().enumerate() {
        let Value::ServerError(e) = reply else {
            continue;
        };
        let entry = i.checked_sub(first_entry).filter(|k| *k < entries.len());
        match entry {
            Some(k) if e.details().is_some_and(|d| d.contains("equal or smaller")) => {
                not_above.push(k);
            }
            _ => return Err(e.into()),
        }
    }
    if let Some(commit) = commit.filter(|_| cluster) {
        commit.writes.query_async::<()>(conn).await?;
    }
    let fates = already_there(conn, entries, &not_above).await?;
    // Refused entries were never written: their references go. Those already there (a batch
    // sent again) keep theirs.
    let refused = (not_above.iter().zip(&fates))
        .filter(|(_, fate)| **fate == Added::Refused)
        .filter_map(|(k, _)| entries[*k].1.shared);
    release_records(conn, refused).await?;
    // On the replicas before anyone sends them: a failover must not take back what was sent.
    conn.replicated().await?;
    Ok(not_above
        .iter()
        .map(|k| (entries[*k].0, StreamId(entries[*k].1.ts)))
        .collect())
}

/// Adds the `XADD` of entry `e` to stream `key`: its id, then its field and value pairs.
fn add_entry(pipe: &mut redis::Pipeline, key: &str, e: &Entry, sources: &SourceTable) {
    pipe.cmd("XADD")
        .arg(key)
        .arg(entry_id(e.ts))
        .arg("e")
        .arg(&*e.event_id);
    // `k` even for slot 0: a stream node whose entries have the same fields stores their
    // names once.
    match e.shared {
        Some(s) => pipe.arg("s").arg(s.to_string()).arg("k").arg(e.slot),
        None => pipe.arg("p").arg(e.payload.text()),
    };
    if let Some(name) = sources.stored_name(e.source) {
        pipe.arg("o").arg(&*name);
    }
    if let Some(d) = &e.chain {
        pipe.arg("c").arg(1);
        if let Some(m) = &d.internal_meeting_id {
            pipe.arg("im").arg(m);
        }
        if let Some(m) = &d.external_meeting_id {
            pipe.arg("xm").arg(m);
        }
        if let Some(other) = &d.other {
            pipe.arg("q").arg(other.text());
        }
        if let Some(m) = &d.meeting {
            pipe.arg("mf").arg(&**m);
        }
    }
    if let Some(original) = e.original {
        pipe.arg("r").arg(original.get());
    }
    if let Some(trace) = &e.trace {
        pipe.arg("tp").arg(trace.to_string());
    }
}

/// Of the entries at `not_above` (their ids not above their stream's last), which are there
/// already (sent before) and which were refused.
async fn already_there(
    conn: &mut StoreConn,
    entries: &[(HookId, Entry)],
    not_above: &[usize],
) -> Result<Vec<Added>, redis::RedisError> {
    if not_above.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for &k in not_above {
        let (hook, e) = &entries[k];
        let id = entry_id(e.ts);
        pipe.cmd("XRANGE").arg(queue_key(*hook)).arg(&id).arg(&id);
    }
    let found: Vec<Vec<Value>> = pipe.query_async(conn).await?;
    Ok(found
        .iter()
        .map(|f| {
            if f.is_empty() {
                Added::Refused
            } else {
                Added::AlreadyThere
            }
        })
        .collect())
}

/// How long a batch mark is kept: a takeover reads it within seconds of the holder's end.
const MARK_TTL_S: u64 = 3600;

/// Adds `mark` beside each hook's entries (its key shares their slot), kept [`MARK_TTL_S`].
fn add_marks(pipe: &mut redis::Pipeline, entries: &[(HookId, Entry)], mark: &str) {
    let mut hooks: Vec<HookId> = entries.iter().map(|(h, _)| *h).collect();
    hooks.sort_unstable();
    hooks.dedup();
    for hook in hooks {
        pipe.cmd("SET")
            .arg(batch_mark_key(hook))
            .arg(mark)
            .arg("EX")
            .arg(MARK_TTL_S);
    }
}

/// Releases one reference to each shared record of `refs` (a record named twice loses two).
async fn release_records(
    conn: &mut StoreConn,
    refs: impl IntoIterator<Item = RecordRef>,
) -> Result<(), redis::RedisError> {
    let mut release = std::collections::BTreeMap::<RecordRef, usize>::new();
    for s in refs {
        *release.entry(s).or_default() += 1;
    }
    if release.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for (s, n) in release {
        evalsha(&mut pipe, &RELEASE_SCRIPT, &[record_key(s)])
            .arg(n)
            .ignore();
    }
    query_loading::<()>(conn, &pipe, &[&RELEASE_SCRIPT]).await
}

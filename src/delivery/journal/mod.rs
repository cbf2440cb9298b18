//! The durable side of the per-hook queues. Each hook has a Redis stream whose entry ids are
//! its callbacks' timestamps (`<ms>-0`, strictly increasing per hook). An entry carries the
//! event id and either the payload itself (`p`: a payload only this callback uses) or a
//! reference (`s`) to a shared payload record, `{PAYLOAD_PREFIX}<ref>`, a hash holding the text
//! once (`t`) and how many entries still refer to it (`n`): an event going to a hundred hooks
//! is stored once. An entry that waits for its plugins (the chain runs when it is sent) also
//! keeps what the chain needs: `c` marks it, `im` and `xm` hold the meeting ids and `q` the
//! event's other form (the bus message for a processed hook, the processed event for a raw
//! one), inline. A batch's entries and records are written in one transaction before they
//! are handed to the workers; removing an entry (delivered, dropped, its hook gone) releases
//! its record, which goes when nothing refers to it any more. Every script is idempotent, so
//! after an error the same call is made again.

mod read;
mod scripts;

use std::sync::Arc;

use redis::AsyncCommands;

pub use read::{
    Position, Stored, StoredBody, last_shared, parse_ts, position, position_of, read_page,
    read_records,
};
use scripts::{
    DRAIN_SCRIPT, RELEASE_SCRIPT, REMOVE_MANY_SCRIPT, REMOVE_SCRIPT, XADD_SCRIPT, evalsha,
    query_loading, record_key,
};

use crate::{
    base::ids::{HookId, RecordRef, StreamId},
    store_conn::StoreConn,
};

use crate::{
    base::{
        redis_keys::{
            PAYLOAD_PREFIX, PAYLOAD_SEQ, QUEUE_PATTERN, batch_mark_key, queue_hook_id, queue_key,
        },
        sources::{SourceId, SourceTable},
    },
    event::Payload,
    plugin_host::Deferred,
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
    /// The shared payload record it refers to; `None` when the entry holds its payload.
    pub shared: Option<RecordRef>,
    /// The source (conference server) of its event; stored by name (`o`), except for the
    /// `default` source.
    pub source: SourceId,
    /// Set while the plugin chain has yet to run over it (at sending time); boxed, so that
    /// the entries of hooks no plugin takes stay small.
    pub chain: Option<Box<Deferred>>,
    /// A redelivery (`hookrelay redeliver`): the timestamp of the callback it sends again,
    /// which it is signed and sent with (stored as `r`).
    pub original: Option<u64>,
}

impl Entry {
    /// The `timestamp` the callback is sent with: its own, or for a redelivery the original's.
    pub fn original_ts(&self) -> u64 {
        self.original.unwrap_or(self.ts)
    }

    /// What removing it takes.
    pub fn removal(&self) -> Removal {
        Removal {
            id: StreamId(self.ts),
            shared: self.shared,
        }
    }
}

/// A payload record to write with a batch: its reference, text and number of entries.
pub struct Record<'a> {
    pub shared: RecordRef,
    pub payload: &'a Payload,
    pub refs: usize,
}

/// What commits a batch: writes that must never land before its entries (the fleet's
/// cursors), and on a Redis Cluster a mark written beside each hook's entries
/// ([`crate::fleet::mark`]).
pub struct Commit {
    pub writes: redis::Pipeline,
    /// `None` off a cluster, where none is written.
    pub mark: Option<String>,
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
    pipe.atomic();
    for r in records {
        pipe.hset_multiple(
            record_key(r.shared),
            &[("t", r.payload.text()), ("n", &r.refs.to_string())],
        )
        .ignore();
    }
    if let Some(last) = records.iter().map(|r| r.shared).max() {
        pipe.set(PAYLOAD_SEQ, last).ignore();
    }
    for (hook, e) in entries {
        let (field, value) = match e.shared {
            Some(s) => ("s", s.to_string()),
            None => ("p", e.payload.text().to_string()),
        };
        let cmd = evalsha(&mut pipe, &XADD_SCRIPT, &queue_key(*hook))
            .arg(format!("{}-0", e.ts))
            .arg("e")
            .arg(&*e.event_id)
            .arg(field)
            .arg(value);
        if let Some(name) = sources.stored_name(e.source) {
            cmd.arg("o").arg(name);
        }
        if let Some(d) = &e.chain {
            cmd.arg("c").arg(1);
            if let Some(m) = &d.internal_meeting_id {
                cmd.arg("im").arg(m);
            }
            if let Some(m) = &d.external_meeting_id {
                cmd.arg("xm").arg(m);
            }
            if let Some(other) = &d.other {
                cmd.arg("q").arg(other.text());
            }
            if let Some(m) = &d.meeting {
                cmd.arg("mf").arg(&**m);
            }
        }
        if let Some(original) = e.original {
            cmd.arg("r").arg(original);
        }
    }
    for cmd in state.cmd_iter() {
        pipe.add_command(cmd.clone()).ignore();
    }
    let cluster = conn.is_cluster();
    if let Some(commit) = commit {
        if cluster {
            if let Some(mark) = &commit.mark {
                add_marks(&mut pipe, entries, mark);
            }
        } else {
            for cmd in commit.writes.cmd_iter() {
                pipe.add_command(cmd.clone()).ignore();
            }
        }
    }
    let added: Vec<i64> = query_loading(conn, &pipe, &[&XADD_SCRIPT]).await?;
    if let Some(commit) = commit.filter(|_| cluster) {
        commit.writes.query_async::<()>(conn).await?;
    }
    let not_added: Vec<(&(HookId, Entry), i64)> = entries
        .iter()
        .zip(added)
        .filter(|(_, added)| *added != 1)
        .collect();
    // Refused entries were never written: their references go. Those already there (a batch
    // sent again) keep theirs.
    let refused = not_added
        .iter()
        .filter(|(_, added)| *added == 0)
        .filter_map(|((_, e), _)| e.shared);
    release_records(conn, refused).await?;
    // On the replicas before anyone sends them: a failover must not take back what was sent.
    conn.replicated().await?;
    Ok(not_added
        .iter()
        .map(|((hook, e), _)| (*hook, StreamId(e.ts)))
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
            .arg(MARK_TTL_S)
            .ignore();
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
        evalsha(&mut pipe, &RELEASE_SCRIPT, &record_key(s))
            .arg(n)
            .ignore();
    }
    query_loading::<()>(conn, &pipe, &[&RELEASE_SCRIPT]).await
}

/// An entry to remove: its id, and the shared record it refers to (released with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub id: StreamId,
    pub shared: Option<RecordRef>,
}

impl Removal {
    /// The stream entry id Redis knows it by.
    fn entry_id(&self) -> String {
        format!("{}-0", self.id)
    }

    /// The record argument of the removal scripts: '' for none.
    fn record_arg(&self) -> String {
        self.shared.map_or(String::new(), |s| s.to_string())
    }
}

/// A hook's entries to remove.
pub type HookRemovals<'a> = (HookId, &'a [Removal]);

/// Adds to `pipe` the removal of `hook`'s entries `(ts, shared record)`, releasing records.
pub fn add_remove(pipe: &mut redis::Pipeline, hook: HookId, entries: &[Removal]) {
    if entries.is_empty() {
        return;
    }
    if entries.iter().all(|r| r.shared.is_none()) {
        let ids: Vec<String> = entries.iter().map(Removal::entry_id).collect();
        pipe.xdel(queue_key(hook), &ids).ignore();
        return;
    }
    let cmd = evalsha(pipe, &REMOVE_SCRIPT, &queue_key(hook)).arg(PAYLOAD_PREFIX);
    for r in entries {
        cmd.arg(r.entry_id()).arg(r.record_arg());
    }
    cmd.ignore();
}

/// Removes the delivered entries `(ts, shared record)` of several hooks in one script call:
/// a record shared by all of them is released once, not once per hook. Hooks whose entries
/// refer to no record are removed with plain `XDEL`s.
pub fn add_remove_many(pipe: &mut redis::Pipeline, hooks: &[HookRemovals<'_>]) {
    let (shared, own): (Vec<HookRemovals<'_>>, Vec<_>) = hooks
        .iter()
        .copied()
        .filter(|(_, e)| !e.is_empty())
        .partition(|(_, e)| e.iter().any(|r| r.shared.is_some()));
    for (hook, entries) in own {
        add_remove(pipe, hook, entries);
    }
    if shared.is_empty() {
        return;
    }
    pipe.cmd("EVALSHA")
        .arg(REMOVE_MANY_SCRIPT.get_hash())
        .arg(shared.len());
    for (hook, _) in &shared {
        pipe.arg(queue_key(*hook));
    }
    pipe.arg(PAYLOAD_PREFIX);
    for (_, entries) in &shared {
        pipe.arg(entries.len());
        for r in entries.iter() {
            pipe.arg(r.entry_id()).arg(r.record_arg());
        }
    }
    pipe.ignore();
}

/// Sends a pipeline made with [`add_remove`] or [`add_remove_many`].
///
/// # Errors
/// When Redis fails; the call may then be made again as it is.
pub async fn send_removals(
    conn: &mut StoreConn,
    pipe: &redis::Pipeline,
) -> Result<(), redis::RedisError> {
    query_loading::<()>(conn, pipe, &[&REMOVE_SCRIPT, &REMOVE_MANY_SCRIPT]).await?;
    // A mark a failover took back would send its callback again.
    conn.replicated().await
}

/// Removes delivered or dropped entries `(ts, shared record)` of one hook.
///
/// # Errors
/// When Redis fails.
pub async fn remove(
    conn: &mut StoreConn,
    hook: HookId,
    entries: &[Removal],
) -> Result<(), redis::RedisError> {
    let mut pipe = redis::pipe();
    add_remove(&mut pipe, hook, entries);
    send_removals(conn, &pipe).await
}

/// Deletes a hook's whole stream, releasing its records, a thousand entries per call.
///
/// # Errors
/// When Redis fails.
pub async fn delete(conn: &mut StoreConn, hook: HookId) -> Result<(), redis::RedisError> {
    let key = queue_key(hook);
    loop {
        let mut pipe = redis::pipe();
        evalsha(&mut pipe, &DRAIN_SCRIPT, &key)
            .arg(PAYLOAD_PREFIX)
            .arg(1000);
        let (removed,): (i64,) = query_loading(conn, &pipe, &[&DRAIN_SCRIPT]).await?;
        if removed == 0 {
            return Ok(());
        }
    }
}

impl Stored {
    /// What removing it takes.
    pub fn removal(&self) -> Removal {
        let shared = match self.body {
            StoredBody::Shared(r) => Some(r),
            _ => None,
        };
        Removal {
            id: StreamId(self.ts),
            shared,
        }
    }
}

/// Deletes the streams of hooks that no longer exist (left behind by a crash between removing a
/// hook and its queue), releasing their records; returns how many.
///
/// # Errors
/// When Redis fails.
pub async fn remove_orphans(
    mut conn: StoreConn,
    live: impl Fn(HookId) -> bool + Sync,
) -> Result<usize, redis::RedisError> {
    let keys = conn.keys_matching(QUEUE_PATTERN).await?;
    let mut removed = 0;
    for key in keys {
        match queue_hook_id(&key) {
            Some(id) if live(id) => {}
            Some(id) => {
                delete(&mut conn, id).await?;
                removed += 1;
            }
            None => {
                let _: () = conn.del(&key).await?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

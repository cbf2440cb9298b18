//! The durable side of the per-hook queues. Each hook has a Redis stream whose entry ids are
//! its callbacks' timestamps (`<ms>-0`, strictly increasing per hook). An entry carries the
//! event id and either the payload itself (`p`: a payload only this callback uses) or a
//! reference (`s`) to a shared payload record, `{PAYLOAD_PREFIX}<ref>`, and the slot of its
//! payload there (`k`; an entry of an earlier version has none: slot 0). A record is a hash
//! holding the payloads of up to 16 events of one batch once each (`t` for slot 0, `t<k>`
//! for the others) and how many entries still refer to any of them (`n`): an event going to a
//! hundred hooks is stored once, and a hook's delivered entries mostly release one record per
//! write. An entry that waits for its plugins (the chain runs when it is sent) also
//! keeps what the chain needs: `c` marks it, `im` and `xm` hold the meeting ids and `q` the
//! event's other form (the bus message for a processed hook, the processed event for a raw
//! one), inline. A batch's entries and records are written in one transaction before they
//! are handed to the workers; a callback of a traced message keeps its trace context (`tp`, W3C
//! `traceparent`). Delivery moves the hook's cursor (`{queue_key}`'s sibling [`cursor_key`],
//! the timestamp of its last delivered entry); the entries behind it go with their stream's
//! whole nodes (`XTRIM MINID ~`), so a delivered entry is never deleted alone, which costs
//! Redis a walk of its node. Only entries that will not be sent (dropped by a bound,
//! unusable) are deleted one by one. An entry that leaves the queue (delivered, dropped, its
//! hook gone) releases its record, which goes when nothing refers to it any more. The readers
//! take what waits after the cursor ([`heads`], [`read_page`] from [`Position::delivered`]).
//! Every write may be repeated (an
//! entry already there is told from a refused one; the scripts are idempotent), so after an
//! error the same call is made again.

mod append;
mod read;
mod scripts;

use std::sync::Arc;

use redis::AsyncCommands;

pub use append::{Commit, Record, append};
pub use read::{
    Head, Position, Stored, StoredBody, heads, last_shared, oldest, parse_ts, position,
    position_of, read_page, read_records,
};
pub(crate) use scripts::evalsha;
use scripts::{DELIVERED_SCRIPT, DRAIN_SCRIPT, REMOVE_SCRIPT, query_loading};

use crate::{
    base::ids::{HookId, RecordRef, StreamId},
    store_conn::StoreConn,
};

use crate::{
    base::{
        redis_keys::{PAYLOAD_PREFIX, QUEUE_PATTERN, cursor_key, queue_hook_id, queue_key},
        sources::SourceId,
    },
    event::Payload,
    plugin_host::Deferred,
};

/// Where a shared payload is stored: its record and its slot there.
pub type SharedAt = (RecordRef, u16);

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
    /// Its payload's slot in that record (0 for an entry that holds its payload).
    pub slot: u16,
    /// The source (conference server) of its event; stored by name (`o`), except for the
    /// `default` source.
    pub source: SourceId,
    /// Set while the plugin chain has yet to run over it (at sending time); boxed, so that
    /// the entries of hooks no plugin takes stay small.
    pub chain: Option<Box<Deferred>>,
    /// A redelivery (`hookrelay redeliver`): the timestamp of the callback it sends again,
    /// which it is signed and sent with (stored as `r`; a timestamp is never 0, so the option
    /// takes no room of its own).
    pub original: Option<std::num::NonZeroU64>,
    /// Where its `enqueue` span sits in its message's trace (`[tracing]`, sampled messages
    /// only; stored as `tp`), so that its attempts join that trace whenever and wherever they
    /// are made. Boxed, so that the entries of untraced messages stay small.
    pub trace: Option<Box<crate::traces::TraceParent>>,
}

impl Entry {
    /// The `timestamp` the callback is sent with: its own, or for a redelivery the original's.
    pub fn original_ts(&self) -> u64 {
        self.original.map_or(self.ts, std::num::NonZeroU64::get)
    }

    /// What removing it takes.
    pub fn removal(&self) -> Removal {
        Removal {
            id: StreamId(self.ts),
            shared: self.shared,
        }
    }
}

/// An entry to remove: its id, and the shared record it refers to (released with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub id: StreamId,
    pub shared: Option<RecordRef>,
}

/// The id Redis knows the entry of timestamp `ts` by.
fn entry_id(ts: u64) -> String {
    format!("{ts}-0")
}

impl Removal {
    /// The stream entry id Redis knows it by.
    fn entry_id(&self) -> String {
        entry_id(self.id.0)
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
    let cmd =
        evalsha(pipe, &REMOVE_SCRIPT, &[queue_key(hook), cursor_key(hook)]).arg(PAYLOAD_PREFIX);
    for r in entries {
        cmd.arg(r.entry_id()).arg(r.record_arg());
    }
    cmd.ignore();
}

/// Marks the delivered entries `(ts, shared record)` of several hooks, oldest first per hook:
/// each hook's cursor moves to its last one, their records are released (a record shared by
/// all of them once, not once per hook) and the stream's whole nodes behind the cursor go. One
/// script call on a single Redis; on a cluster (where records are not shared and a script
/// holds one slot) one per hook.
pub fn add_delivered(pipe: &mut redis::Pipeline, hooks: &[HookRemovals<'_>], per_hook: bool) {
    let hooks: Vec<HookRemovals<'_>> = hooks
        .iter()
        .copied()
        .filter(|(_, e)| !e.is_empty())
        .collect();
    let groups: Vec<&[HookRemovals<'_>]> = if per_hook {
        hooks.chunks(1).collect()
    } else {
        vec![&hooks[..]]
    };
    for group in groups.into_iter().filter(|g| !g.is_empty()) {
        let keys: Vec<String> = group
            .iter()
            .flat_map(|(hook, _)| [queue_key(*hook), cursor_key(*hook)])
            .collect();
        evalsha(pipe, &DELIVERED_SCRIPT, &keys).arg(PAYLOAD_PREFIX);
        for (_, entries) in group {
            pipe.arg(entries.len());
            for r in entries.iter() {
                pipe.arg(r.id.0).arg(r.record_arg());
            }
        }
        pipe.ignore();
    }
}

/// Sends a pipeline made with [`add_remove`] or [`add_delivered`].
///
/// # Errors
/// When Redis fails; the call may then be made again as it is.
pub async fn send_removals(
    conn: &mut StoreConn,
    pipe: &redis::Pipeline,
) -> Result<(), redis::RedisError> {
    query_loading::<()>(conn, pipe, &[&REMOVE_SCRIPT, &DELIVERED_SCRIPT]).await?;
    // A mark a failover took back would send its callback again.
    conn.replicated().await
}

/// Removes dropped entries `(ts, shared record)` of one hook (entries after its cursor that
/// will not be sent: each is deleted alone, which only bounds and unusable entries need).
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

/// Deletes a hook's whole stream and its cursor, releasing the records of the entries after
/// the cursor, a thousand entries per call.
///
/// # Errors
/// When Redis fails.
pub async fn delete(conn: &mut StoreConn, hook: HookId) -> Result<(), redis::RedisError> {
    let (key, cursor) = (queue_key(hook), cursor_key(hook));
    loop {
        let mut pipe = redis::pipe();
        evalsha(&mut pipe, &DRAIN_SCRIPT, &[&key, &cursor])
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
            StoredBody::Shared(r, _) => Some(r),
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

#[cfg(test)]
mod size_tests {
    /// Every queued callback is an `Entry` in memory (a 100-hook burst holds half a million):
    /// a field added must not grow it (96 bytes since issue 34; the trace context is boxed and
    /// `original` is non-zero to make room for it).
    #[test]
    fn an_entry_stays_96_bytes() {
        assert_eq!(std::mem::size_of::<super::Entry>(), 96);
    }
}

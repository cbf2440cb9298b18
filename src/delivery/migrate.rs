//! Moves the hooks' streams from the names of earlier versions (`bigbluebutton:webhooks:out:
//! queue:<id>`) to the current ones ([`queue_key`], in the slot of the hook's hash), before
//! anything reads the queues. On a single Redis a stream is renamed. Where the current name is
//! taken too (an instance of an earlier version wrote meanwhile), or on a Redis Cluster (where
//! the two names hash to different slots), the two streams are merged, a page at a time and in
//! id order, into a stream written beside the current one, which then replaces it; the old one
//! goes last, so a move cut short is simply made again.

use std::collections::VecDeque;

use redis::{AsyncCommands, RedisError, Script};

use super::journal::{self, parse_ts};
use crate::{
    base::redis_keys::{LEGACY_QUEUE_PREFIX, legacy_queue_hook_id, queue_key, queue_rebuild_key},
    store_conn::StoreConn,
};

/// Entries read or written per round trip.
const PAGE: usize = 500;

/// Renames KEYS[1] to KEYS[2] unless KEYS[2] exists: 1 renamed, 0 not (both exist), -1 KEYS[1]
/// is gone (moved already).
const RENAME_UNLESS_TAKEN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('RENAMENX', KEYS[1], KEYS[2])
";

/// One hook's stream, moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub hook: u64,
    /// The entries it now holds.
    pub entries: usize,
}

/// Moves every stream named as by earlier versions; returns those moved. Keys of that prefix
/// whose end is not a hook id are left alone.
///
/// # Errors
/// When Redis fails; what was moved stays moved, and the call may be made again.
pub async fn legacy_queues(conn: &StoreConn) -> Result<Vec<Moved>, RedisError> {
    let keys = conn
        .keys_matching(&format!("{LEGACY_QUEUE_PREFIX}*"))
        .await?;
    let mut moved = Vec::new();
    for key in keys {
        let Some(hook) = legacy_queue_hook_id(&key) else {
            continue;
        };
        if let Some(m) = move_one(&mut conn.clone(), hook, &key).await? {
            moved.push(m);
        }
    }
    Ok(moved)
}

async fn move_one(conn: &mut StoreConn, hook: u64, old: &str) -> Result<Option<Moved>, RedisError> {
    let new = queue_key(hook);
    if !conn.is_cluster() {
        let renamed: i64 = Script::new(RENAME_UNLESS_TAKEN)
            .key(old)
            .key(&new)
            .invoke_async(conn)
            .await?;
        match renamed {
            -1 => return Ok(None),
            1 => {
                let entries = journal::position(conn, hook).await?.length;
                return Ok(Some(Moved { hook, entries }));
            }
            _ => {}
        }
    }
    merge(conn, hook, old, &new).await.map(Some)
}

/// Merges stream `old` into `new` through [`queue_rebuild_key`]: entries in id order, the one
/// of `new` first where both hold the same id; an entry found under both names with the same
/// fields is kept once (a batch written under both: its shared payload records counted it
/// once); ids made strictly increasing again where two different entries had the same.
async fn merge(conn: &mut StoreConn, hook: u64, old: &str, new: &str) -> Result<Moved, RedisError> {
    let rebuild = queue_rebuild_key(hook);
    let last_old = journal::position_of(conn, old).await?.last_ts;
    let last_new = journal::position_of(conn, new).await?.last_ts;
    let () = conn.del(&rebuild).await?;
    let mut current = Pager::new(new);
    let mut legacy = Pager::new(old);
    let mut last: Option<Entry> = None;
    let mut written = 0;
    loop {
        let mut pipe = redis::pipe();
        while pipe.len() < PAGE {
            let a = current.peek(conn).await?.map(|e| e.ts);
            let b = legacy.peek(conn).await?.map(|e| e.ts);
            let next = match (a, b) {
                (Some(a), Some(b)) if b < a => legacy.take(),
                (Some(_), _) => current.take(),
                (None, Some(_)) => legacy.take(),
                (None, None) => break,
            };
            let Some(entry) = next.and_then(|e| place(last.as_ref(), e)) else {
                continue;
            };
            let mut cmd = redis::cmd("XADD");
            cmd.arg(&rebuild).arg(format!("{}-0", entry.ts));
            for (field, value) in &entry.fields {
                cmd.arg(field).arg(value.as_slice());
            }
            pipe.add_command(cmd).ignore();
            last = Some(entry);
        }
        if pipe.is_empty() {
            break;
        }
        written += pipe.len();
        let () = pipe.query_async(conn).await?;
    }
    let highest = last
        .as_ref()
        .map_or(0, |e| e.ts)
        .max(last_old)
        .max(last_new);
    // One transaction on a single Redis; on a cluster, the old stream's slot last.
    let mut finish = redis::pipe();
    finish.atomic();
    if written > 0 {
        finish
            .cmd("XSETID")
            .arg(&rebuild)
            .arg(format!("{highest}-0"))
            .ignore()
            .rename(&rebuild, new)
            .ignore();
    }
    // Last, once the rest is done: the old stream.
    let () = finish.del(old).ignore().query_async(conn).await?;
    Ok(Moved {
        hook,
        entries: written,
    })
}

/// The next entry of the merge, after `prev`: `None` when it is `prev` again (the same id and
/// fields under the other name), else given an id after `prev`'s if it has not one already.
fn place(prev: Option<&Entry>, mut entry: Entry) -> Option<Entry> {
    if let Some(prev) = prev {
        if prev.original_ts == entry.ts && prev.fields == entry.fields {
            return None;
        }
        entry.ts = entry.ts.max(prev.ts + 1);
    }
    Some(entry)
}

/// One stream entry as stored: its id's millisecond part and its fields, by name.
#[derive(Debug, Clone)]
struct Entry {
    ts: u64,
    /// The id it had before the merge made ids increasing (equal to `ts` unless moved).
    original_ts: u64,
    fields: Vec<(String, Vec<u8>)>,
}

/// Reads a stream a page at a time, oldest first.
struct Pager<'a> {
    key: &'a str,
    buffered: VecDeque<Entry>,
    /// The id of the last entry read; `None` before the first page.
    after: Option<String>,
    done: bool,
}

impl<'a> Pager<'a> {
    fn new(key: &'a str) -> Self {
        Self {
            key,
            buffered: VecDeque::new(),
            after: None,
            done: false,
        }
    }

    async fn peek(&mut self, conn: &mut StoreConn) -> Result<Option<&Entry>, RedisError> {
        if self.buffered.is_empty() && !self.done {
            let start = self
                .after
                .as_ref()
                .map_or("-".to_string(), |id| format!("({id}"));
            let page: redis::streams::StreamRangeReply =
                conn.xrange_count(self.key, start, "+", PAGE).await?;
            self.done = page.ids.len() < PAGE;
            if let Some(last) = page.ids.last() {
                self.after = Some(last.id.clone());
            }
            self.buffered.extend(page.ids.iter().filter_map(|sid| {
                let ts = parse_ts(&sid.id)?;
                let mut fields: Vec<(String, Vec<u8>)> = sid
                    .map
                    .keys()
                    .filter_map(|f| Some((f.clone(), sid.get::<Vec<u8>>(f)?)))
                    .collect();
                fields.sort();
                Some(Entry {
                    ts,
                    original_ts: ts,
                    fields,
                })
            }));
        }
        Ok(self.buffered.front())
    }

    fn take(&mut self) -> Option<Entry> {
        self.buffered.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ts: u64, event: &str) -> Entry {
        Entry {
            ts,
            original_ts: ts,
            fields: vec![("e".into(), event.as_bytes().to_vec())],
        }
    }

    /// Merges two id-ordered lists as the merge does.
    fn merged(current: &[(u64, &str)], legacy: &[(u64, &str)]) -> Vec<(u64, String)> {
        let mut all: Vec<(u64, u8, &str)> = current.iter().map(|(t, e)| (*t, 0, *e)).collect();
        all.extend(legacy.iter().map(|(t, e)| (*t, 1, *e)));
        all.sort_by_key(|(t, from, _)| (*t, *from));
        let mut last: Option<Entry> = None;
        let mut out = Vec::new();
        for (t, _, e) in all {
            if let Some(placed) = place(last.as_ref(), entry(t, e)) {
                let name = String::from_utf8_lossy(&placed.fields[0].1).into_owned();
                out.push((placed.ts, name));
                last = Some(placed);
            }
        }
        out
    }

    #[test]
    fn the_same_entry_under_both_names_is_kept_once() {
        assert_eq!(
            merged(&[(10, "a"), (30, "c")], &[(10, "a"), (20, "b")]),
            [(10, "a".into()), (20, "b".into()), (30, "c".into())]
        );
    }

    #[test]
    fn two_entries_with_one_id_both_stay_and_ids_keep_increasing() {
        assert_eq!(
            merged(&[(10, "a"), (11, "c")], &[(10, "b"), (12, "d")]),
            [
                (10, "a".into()),
                (11, "b".into()),
                (12, "c".into()),
                (13, "d".into())
            ]
        );
    }
}

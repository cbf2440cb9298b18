//! Moves the hooks' streams from the names of earlier versions (`bigbluebutton:webhooks:out:
//! queue:<id>`) to the current ones ([`queue_key`], in the slot of the hook's hash). On a single
//! Redis a stream is renamed, at once. Where the current name is taken too (an instance of an
//! earlier version wrote meanwhile), or on a Redis Cluster (where the two names hash to
//! different slots), the two streams are merged, a page at a time, into a stream written beside
//! the current one, which then replaces it, the old one going in the same transaction (on a
//! cluster, last). A merge must not run beside a writer of either stream: only the one writer
//! of the queues (a relay alone, or the holder of the fleet lease) asks for it.
//!
//! In a merge, the current stream's waiting entries keep their ids (a deliverer may be sending
//! one and mark it by its id) and its cursor stays; an entry of the old stream goes where its
//! id puts it, but after the cursor (and in a fleet, whose deliverers may be running, after
//! the current stream's last entry), or just after the entry before it when that id is taken,
//! and is dropped when the current stream holds the
//! same entry (the same fields: a payload carries its timestamp, so two callbacks never have
//! them), as after a move cut short and made again.

use crate::base::ids::HookId;

use std::{
    collections::{HashSet, VecDeque},
    hash::{DefaultHasher, Hash, Hasher},
};

use redis::{AsyncCommands, RedisError, Script};

use super::journal::{self, parse_ts};
use crate::{
    base::redis_keys::{
        LEGACY_QUEUE_PREFIX, cursor_key, legacy_queue_hook_id, queue_key, queue_rebuild_key,
    },
    store_conn::StoreConn,
};

/// Entries read or written per round trip.
const PAGE: usize = 500;

/// Renames KEYS[1] to KEYS[2] unless KEYS[2] exists: the entries it then holds, -1 when both
/// exist, -2 when KEYS[1] is gone (moved already). A cursor KEYS[3] left without its stream
/// goes: every entry of an earlier version's stream waits.
static RENAME_UNLESS_TAKEN: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('RENAMENX', KEYS[1], KEYS[2]) == 0 then return -1 end
redis.call('DEL', KEYS[3])
return redis.call('XLEN', KEYS[2])
",
    )
});

/// One hook's stream, moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) hook: HookId,
    /// The entries it now holds.
    pub(crate) entries: usize,
}

/// Moves every stream named as by earlier versions; returns those moved. Without `merge`, only
/// those a rename moves (a single Redis, the current name free); the others wait for a call
/// with `merge`. Keys of that prefix whose end is not a hook id, or that hold no stream, are
/// left alone.
///
/// # Errors
/// When Redis fails; what was moved stays moved, and the call may be made again.
pub(crate) async fn legacy_queues(
    conn: &StoreConn,
    merge: bool,
    deliverers: bool,
) -> Result<Vec<Moved>, RedisError> {
    let keys = conn
        .keys_matching(&format!("{LEGACY_QUEUE_PREFIX}*"))
        .await?;
    let mut moved = Vec::new();
    for key in keys {
        let Some(hook) = legacy_queue_hook_id(&key) else {
            continue;
        };
        let mut conn = conn.clone();
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await?;
        if kind != "stream" {
            if kind != "none" {
                tracing::warn!(
                    key,
                    kind,
                    "not moving a key named as a queue that holds no stream"
                );
            }
            continue;
        }
        if let Some(m) = move_one(&mut conn, hook, &key, merge, deliverers).await? {
            moved.push(m);
        }
    }
    Ok(moved)
}

async fn move_one(
    conn: &mut StoreConn,
    hook: HookId,
    old: &str,
    merge: bool,
    deliverers: bool,
) -> Result<Option<Moved>, RedisError> {
    let new = queue_key(hook);
    if !conn.is_cluster() {
        let renamed: i64 = RENAME_UNLESS_TAKEN
            .key(old)
            .key(&new)
            .key(cursor_key(hook))
            .invoke_async(conn)
            .await?;
        match usize::try_from(renamed) {
            Ok(entries) => return Ok(Some(Moved { hook, entries })),
            Err(_) if renamed == -2 => return Ok(None),
            Err(_) => {}
        }
    }
    if !merge {
        return Ok(None);
    }
    merge_into(conn, hook, old, &new, deliverers)
        .await
        .map(Some)
}

/// Merges stream `old` into `new` through [`queue_rebuild_key`], as the module says. With
/// `deliverers` (a fleet's instances may be delivering the hook meanwhile) the old stream's
/// entries go after all of the current one's: a deliverer has taken the current entries up to
/// the last, and its marks of them move the cursor past anything placed before.
async fn merge_into(
    conn: &mut StoreConn,
    hook: HookId,
    old: &str,
    new: &str,
    deliverers: bool,
) -> Result<Moved, RedisError> {
    let rebuild = queue_rebuild_key(hook);
    let last_old = journal::position_of(conn, old).await?.last_ts;
    let last_new = journal::position_of(conn, new).await?.last_ts;
    // What the current stream holds, to know the old stream's entries it has already.
    let mut held = HashSet::new();
    let mut pager = Pager::new(new);
    while let Some(e) = pager.next(conn).await? {
        held.insert(e.digest());
    }
    let () = conn.del(&rebuild).await?;
    // The current stream's delivered entries (up to its cursor) are not written again, and
    // the old stream's go after them.
    let delivered: Option<u64> = conn.hget(cursor_key(hook), "d").await?;
    let mut current = Pager::new(new);
    current.after = delivered.map(|d| format!("{d}-0"));
    let mut legacy = Pager::new(old);
    let floor = match deliverers {
        true => delivered.unwrap_or(0).max(last_new),
        false => delivered.unwrap_or(0),
    };
    let mut last: Option<u64> = None;
    let mut written = 0;
    loop {
        let mut pipe = redis::pipe();
        while pipe.len() < PAGE {
            let a = current.peek(conn).await?.map(|e| e.ts);
            let b = legacy.peek(conn).await?.map(|e| e.ts);
            let Some(step) = next_step(a, b, last, floor) else {
                break;
            };
            let (entry, ts) = match step {
                Step::Current(ts) => (current.take(), ts),
                Step::Legacy(ts) => match legacy.take() {
                    Some(e) if held.contains(&e.digest()) => continue,
                    e => (e, ts),
                },
            };
            let Some(entry) = entry else { break };
            let mut cmd = redis::cmd("XADD");
            cmd.arg(&rebuild).arg(format!("{ts}-0"));
            for (field, value) in &entry.fields {
                cmd.arg(field).arg(value.as_slice());
            }
            pipe.add_command(cmd).ignore();
            last = Some(ts);
        }
        if pipe.is_empty() {
            break;
        }
        written += pipe.len();
        let () = pipe.query_async(conn).await?;
    }
    let highest = last.unwrap_or(0).max(last_old).max(last_new);
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
    } else if highest > last_new {
        // Nothing to keep but the ids given so far: an empty stream that remembers them.
        finish
            .cmd("XADD")
            .arg(new)
            .arg("MAXLEN")
            .arg(0)
            .arg(format!("{highest}-0"))
            .arg("e")
            .arg("")
            .ignore();
    }
    let () = finish.del(old).ignore().query_async(conn).await?;
    Ok(Moved {
        hook,
        entries: written,
    })
}

/// Which stream the merge takes from next, and the id the entry gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Current(u64),
    Legacy(u64),
}

/// The next step after id `last`, the current stream's next entry at id `a` and the old one's
/// at `b`: the current entry keeps its id; the old one is placed after `last` and after
/// `floor`, and goes first if it then comes before the current one.
fn next_step(a: Option<u64>, b: Option<u64>, last: Option<u64>, floor: u64) -> Option<Step> {
    let placed = b.map(|b| last.map_or(b, |l| b.max(l + 1)).max(floor + 1));
    match (a, placed) {
        (Some(a), Some(p)) if p < a => Some(Step::Legacy(p)),
        (Some(a), _) => Some(Step::Current(a)),
        (None, Some(p)) => Some(Step::Legacy(p)),
        (None, None) => None,
    }
}

/// One stream entry as stored: its id's millisecond part and its fields, by name.
#[derive(Debug, Clone)]
struct Entry {
    ts: u64,
    fields: Vec<(String, Vec<u8>)>,
}

impl Entry {
    /// A digest of its fields.
    fn digest(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.fields.hash(&mut h);
        h.finish()
    }
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
                Some(Entry { ts, fields })
            }));
        }
        Ok(self.buffered.front())
    }

    fn take(&mut self) -> Option<Entry> {
        self.buffered.pop_front()
    }

    async fn next(&mut self, conn: &mut StoreConn) -> Result<Option<Entry>, RedisError> {
        self.peek(conn).await?;
        Ok(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merges two id-ordered lists of `(id, name)` as the merge does (without the check for
    /// entries held already).
    fn merged(current: &[(u64, &str)], legacy: &[(u64, &str)]) -> Vec<(u64, String)> {
        let (mut i, mut j, mut last, mut out) = (0, 0, None, Vec::new());
        while let Some(step) = next_step(
            current.get(i).map(|c| c.0),
            legacy.get(j).map(|l| l.0),
            last,
            0,
        ) {
            let (ts, name) = match step {
                Step::Current(ts) => {
                    i += 1;
                    (ts, current[i - 1].1)
                }
                Step::Legacy(ts) => {
                    j += 1;
                    (ts, legacy[j - 1].1)
                }
            };
            out.push((ts, name.to_string()));
            last = Some(ts);
        }
        out
    }

    #[test]
    fn old_entries_go_after_the_floor() {
        // The cursor (or, with a fleet's deliverers running, the current stream's last id): 25.
        assert_eq!(
            next_step(Some(30), Some(20), None, 25),
            Some(Step::Legacy(26))
        );
        assert_eq!(
            next_step(Some(26), Some(20), None, 25),
            Some(Step::Current(26))
        );
        assert_eq!(
            next_step(None, Some(20), Some(40), 25),
            Some(Step::Legacy(41))
        );
        assert_eq!(next_step(None, None, Some(40), 25), None);
    }

    #[test]
    fn entries_interleave_by_id() {
        assert_eq!(
            merged(&[(10, "a"), (30, "c")], &[(20, "b"), (40, "d")]),
            [
                (10, "a".into()),
                (20, "b".into()),
                (30, "c".into()),
                (40, "d".into())
            ]
        );
    }

    #[test]
    fn current_entries_keep_their_ids_and_old_ones_go_after_a_taken_id() {
        assert_eq!(
            merged(&[(10, "a"), (11, "c")], &[(10, "b"), (12, "d")]),
            [
                (10, "a".into()),
                (11, "c".into()),
                (12, "b".into()),
                (13, "d".into())
            ]
        );
        assert_eq!(
            merged(&[(10, "a"), (20, "c")], &[(10, "b")]),
            [(10, "a".into()), (11, "b".into()), (20, "c".into())]
        );
    }
}

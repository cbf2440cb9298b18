//! How far back each instance's kept messages reach, said in the store every quarter of a
//! lease, so that the fleet lease goes only to an instance that can resume where the last
//! holder stopped: one whose kept messages hold every source's cursor ([`decide`]). One that
//! cannot (an instance started again after the holder died keeps nothing from before its
//! start) waits while another can; when none can, the one whose record has been whole for
//! longest takes it. `hookrelay fleet status` reads the same records.
//!
//! The records live in one hash, [`REACH_KEY`]: field the instance, value `<until> <JSON>`,
//! `until` in milliseconds of the store's clock (so the instances' clocks need not agree);
//! whoever writes drops the records whose time ran out.

use std::time::Duration;

use redis::Script;
use serde::{Deserialize, Serialize};

use super::backlog::{Resume, SourceState};
use crate::store_conn::StoreConn;

/// The store key of the instances' records.
pub(crate) const REACH_KEY: &str = "hookrelay:fleet:reach";

/// One instance's record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Reach {
    pub(super) instance: String,
    /// It holds the fleet lease (it queues; it keeps nothing).
    pub(super) holder: bool,
    /// Its kept messages reach back to the last holder's place in every source: it may take
    /// the lease at once.
    pub(crate) able: bool,
    pub(super) sources: Vec<SourceReach>,
}

/// What one instance keeps of one source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct SourceReach {
    pub(super) source: String,
    /// What it found of the source's cursor ([`Resume::name`]).
    pub(super) cursor: String,
    /// Messages kept.
    pub(super) kept: usize,
    /// For how long every message of the source has been kept (since its subscription, or
    /// since the last message it let go).
    pub(super) whole_ms: u64,
}

impl Reach {
    /// A follower's record from what its backlog says of each source (`names[i]` is source
    /// `i`'s name). `keep` is `fleet.buffer_s`: a source this instance has heard whole for that
    /// long without a message is quiet, and nothing of it can be missing here.
    pub(crate) fn follower(
        instance: &str,
        names: &[&str],
        states: &[SourceState],
        keep: Duration,
    ) -> Self {
        let able = states.iter().all(|s| match s.resume {
            Resume::AfterCursor | Resume::NoCursor => true,
            Resume::NothingKept => s.whole >= keep,
            Resume::AcrossGap | Resume::CursorNotFound => false,
        });
        let sources = names
            .iter()
            .zip(states)
            .map(|(name, s)| SourceReach {
                source: (*name).to_string(),
                cursor: s.resume.name().to_string(),
                kept: s.kept,
                whole_ms: u64::try_from(s.whole.as_millis()).unwrap_or(u64::MAX),
            })
            .collect();
        Self {
            instance: instance.to_string(),
            holder: false,
            able,
            sources,
        }
    }

    /// The holder's record.
    pub(crate) fn holder(instance: &str) -> Self {
        Self {
            instance: instance.to_string(),
            holder: true,
            able: true,
            sources: Vec::new(),
        }
    }

    /// For how long its record of every source has been whole (the least over the sources).
    pub(crate) fn whole_ms(&self) -> u64 {
        self.sources.iter().map(|s| s.whole_ms).min().unwrap_or(0)
    }
}

/// What a follower does when the lease may be free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Ask for it.
    Take,
    /// Leave it to this instance, which can resume better.
    WaitFor(String),
}

/// Whether `me` may ask for the lease, given the other live records: at once when its kept
/// messages reach every cursor; else only when no other can, and none has a record whole for
/// longer (the instance name breaks ties, so that two never wait for each other).
pub(crate) fn decide(me: &Reach, others: &[Reach]) -> Decision {
    if me.able {
        return Decision::Take;
    }
    let candidates = || {
        others
            .iter()
            .filter(|o| o.instance != me.instance && !o.holder)
    };
    if let Some(o) = candidates().find(|o| o.able) {
        return Decision::WaitFor(o.instance.clone());
    }
    let rank = |r: &Reach| (r.whole_ms(), std::cmp::Reverse(r.instance.clone()));
    match candidates()
        .filter(|o| rank(o) > rank(me))
        .max_by_key(|o| rank(o))
    {
        Some(o) => Decision::WaitFor(o.instance.clone()),
        None => Decision::Take,
    }
}

/// Writes `record` for `ttl` (by the store's clock), drops the records whose time ran out and
/// returns the live ones, this one's included.
const REPORT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + tonumber(ARGV[2])) .. ' ' .. ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sp = string.find(v, ' ', 1, true)
  local until_ms = sp and tonumber(string.sub(v, 1, sp - 1)) or 0
  if until_ms < now then redis.call('HDEL', KEYS[1], all[i]) else table.insert(live, string.sub(v, sp + 1)) end
end
return live
";

/// The live records and how long each has left (ms), read only.
const READ: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sp = string.find(v, ' ', 1, true)
  local until_ms = sp and tonumber(string.sub(v, 1, sp - 1)) or 0
  if until_ms >= now then
    table.insert(live, string.format('%d', until_ms - now))
    table.insert(live, string.sub(v, sp + 1))
  end
end
return live
";

/// Says `record` in the store for `ttl`; the live records (this one's included). Records that
/// do not parse (another version's) are left out.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn report(
    conn: &mut StoreConn,
    record: &Reach,
    ttl: Duration,
) -> redis::RedisResult<Vec<Reach>> {
    static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(REPORT));
    let json = serde_json::to_string(record).unwrap_or_default();
    let live: Vec<String> = SCRIPT
        .key(REACH_KEY)
        .arg(&record.instance)
        .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        .arg(json)
        .invoke_async(conn)
        .await?;
    Ok(live
        .iter()
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect())
}

/// The live records, each with how long it has left.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn read(conn: &mut StoreConn) -> redis::RedisResult<Vec<(Reach, Duration)>> {
    static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(READ));
    let flat: Vec<String> = SCRIPT.key(REACH_KEY).invoke_async(conn).await?;
    Ok(flat
        .chunks(2)
        .filter_map(|pair| {
            let [left, json] = pair else { return None };
            let record = serde_json::from_str(json).ok()?;
            Some((record, Duration::from_millis(left.parse().unwrap_or(0))))
        })
        .collect())
}

/// Takes `instance`'s record out (a clean stop).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn leave(conn: &mut StoreConn, instance: &str) -> redis::RedisResult<()> {
    redis::AsyncCommands::hdel(conn, REACH_KEY, instance).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(resume: Resume, whole_s: u64) -> SourceState {
        SourceState {
            resume,
            kept: 10,
            whole: Duration::from_secs(whole_s),
        }
    }

    fn follower(name: &str, states: &[SourceState]) -> Reach {
        let names = vec!["a"; states.len()];
        Reach::follower(name, &names, states, Duration::from_secs(60))
    }

    #[test]
    fn an_instance_that_reaches_every_cursor_takes_the_lease_at_once() {
        let me = follower(
            "s",
            &[state(Resume::AfterCursor, 30), state(Resume::NoCursor, 30)],
        );
        assert!(me.able);
        let restarted = follower("r", &[state(Resume::CursorNotFound, 1)]);
        assert_eq!(
            decide(&me, std::slice::from_ref(&restarted)),
            Decision::Take
        );
    }

    #[test]
    fn an_instance_started_after_the_holder_died_waits_for_one_that_can_resume() {
        let restarted = follower("a", &[state(Resume::CursorNotFound, 1)]);
        assert!(!restarted.able);
        let survivor = follower("b", &[state(Resume::AfterCursor, 30)]);
        assert_eq!(
            decide(&restarted, &[survivor.clone(), restarted.clone()]),
            Decision::WaitFor("b".into())
        );
        // Alone (the survivor's record ran out), it takes the lease.
        assert_eq!(
            decide(&restarted, std::slice::from_ref(&restarted)),
            Decision::Take
        );
        // A holder's record is no candidate.
        assert_eq!(
            decide(&restarted, &[Reach::holder("h")]),
            Decision::Take,
            "the holder's record is not a follower's"
        );
    }

    #[test]
    fn when_none_can_resume_the_longest_whole_record_takes_it_and_two_never_wait_for_each_other() {
        let young = follower("a", &[state(Resume::CursorNotFound, 2)]);
        let old = follower("b", &[state(Resume::CursorNotFound, 20)]);
        assert_eq!(
            decide(&young, std::slice::from_ref(&old)),
            Decision::WaitFor("b".into())
        );
        assert_eq!(decide(&old, std::slice::from_ref(&young)), Decision::Take);
        // Equal records: the name decides, the same way for both.
        let twin_a = follower("a", &[state(Resume::AcrossGap, 5)]);
        let twin_b = follower("b", &[state(Resume::AcrossGap, 5)]);
        let a = decide(&twin_a, std::slice::from_ref(&twin_b));
        let b = decide(&twin_b, std::slice::from_ref(&twin_a));
        assert_eq!([a, b].iter().filter(|d| **d == Decision::Take).count(), 1);
    }

    #[test]
    fn a_quiet_source_heard_for_the_whole_buffer_is_no_obstacle() {
        let quiet = follower("q", &[state(Resume::NothingKept, 61)]);
        assert!(quiet.able);
        let just_started = follower("n", &[state(Resume::NothingKept, 1)]);
        assert!(!just_started.able);
        assert_eq!(quiet.whole_ms(), 61_000);
    }

    #[test]
    fn records_round_trip_as_json() {
        let r = follower("x", &[state(Resume::AfterCursor, 3)]);
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""cursor":"found""#), "{json}");
        assert_eq!(serde_json::from_str::<Reach>(&json).unwrap(), r);
    }
}

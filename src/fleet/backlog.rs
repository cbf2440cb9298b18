//! What an instance that does not hold the lease keeps of each source's bus: the messages of
//! the last `fleet.buffer_s` seconds (at most `fleet.buffer_mib` per source), so that on taking
//! the lease over it can queue what the holder had not queued yet; and how far back that
//! record is whole, so that the fleet can tell which instance can resume where the holder
//! stopped ([`super::reach`]).

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use super::cursor::{Cursor, digest_bytes};
use crate::bus::BusMessage;

/// One kept message and its digest (computed once, when it arrives).
struct Kept {
    digest: [u8; 20],
    message: BusMessage,
}

/// One source's kept messages, oldest first.
#[derive(Default)]
struct SourceLog {
    kept: VecDeque<Kept>,
    bytes: usize,
    /// When the last message let go (too old, or too much) had arrived: the record is whole
    /// only after it.
    evicted: Option<Instant>,
    /// When this source's current subscription began, as far as this instance knows: the
    /// record is whole only after it.
    subscribed: Option<Instant>,
    /// The current subscription's epoch ([`BusMessage::epoch`]).
    epoch: u64,
}

impl SourceLog {
    /// Since when every message of the source is here: the later of the subscription's start
    /// and the last message let go.
    fn whole_since(&self) -> Option<Instant> {
        match (self.subscribed, self.evicted) {
            (Some(s), Some(e)) => Some(s.max(e)),
            (s, None) => s,
            (None, Some(_)) => None,
        }
    }
}

/// Each source's last messages.
pub(crate) struct Backlog {
    sources: Vec<SourceLog>,
    keep: Duration,
    max_bytes: usize,
}

/// What a source's cursor said about its kept messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// The cursor was found, and every message since is here: everything after it is queued.
    AfterCursor,
    /// No cursor: nothing of that source was ever queued; everything kept is.
    NoCursor,
    /// The cursor was found, but this instance's subscription was lost and made again since:
    /// what was published meanwhile is not here. Everything after the cursor is queued.
    AcrossGap,
    /// The cursor is not among the kept messages (older than them, or a message this
    /// instance never got): everything kept is queued, some perhaps a second time.
    CursorNotFound,
    /// Nothing of that source was kept (this instance has just started, or the source is
    /// quiet): nothing to queue.
    NothingKept,
}

impl Resume {
    /// The name used in the store, logs and `fleet status`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::AfterCursor => "found",
            Self::NoCursor => "no-cursor",
            Self::AcrossGap => "found-across-a-gap",
            Self::CursorNotFound => "not-found",
            Self::NothingKept => "nothing-kept",
        }
    }
}

/// What this instance can say of one source: whether its kept messages reach back to the
/// cursor, how many it keeps, and for how long its record has been whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceState {
    pub(crate) resume: Resume,
    pub(crate) kept: usize,
    /// How long (up to now) every message of the source has been here.
    pub(crate) whole: Duration,
}

impl Backlog {
    pub(crate) fn new(sources: usize, keep: Duration, max_bytes: usize) -> Self {
        Self {
            sources: (0..sources).map(|_| SourceLog::default()).collect(),
            keep,
            max_bytes,
        }
    }

    /// Notes that `source`'s subscription `epoch` began at `at` (seen by the follower; a
    /// message of a later epoch says so too).
    pub(crate) fn subscribed(&mut self, source: usize, epoch: u64, at: Instant) {
        if let Some(log) = self.sources.get_mut(source)
            && epoch > log.epoch
        {
            log.epoch = epoch;
            log.subscribed = Some(at);
        }
    }

    /// Keeps `m`, and lets go of what is too old or too much.
    pub(crate) fn push(&mut self, m: BusMessage) {
        let source = usize::from(m.source);
        self.subscribed(source, m.epoch, m.arrived);
        let Some(log) = self.sources.get_mut(source) else {
            return;
        };
        log.bytes += m.payload.len();
        let now = m.arrived;
        log.kept.push_back(Kept {
            digest: digest_bytes(&m.payload),
            message: m,
        });
        while let Some(front) = log.kept.front() {
            let old = now.saturating_duration_since(front.message.arrived) > self.keep;
            if !old && log.bytes <= self.max_bytes {
                break;
            }
            log.bytes -= front.message.payload.len();
            log.evicted = Some(front.message.arrived);
            log.kept.pop_front();
        }
    }

    /// Messages kept in all.
    pub(crate) fn len(&self) -> usize {
        self.sources.iter().map(|s| s.kept.len()).sum()
    }

    /// Where `source` would resume after `cursor`: how many kept messages to skip, and how.
    fn resume_point(&self, source: usize, cursor: Option<&Cursor>) -> (usize, Resume) {
        let Some(log) = self.sources.get(source) else {
            return (0, Resume::NothingKept);
        };
        let Some(cursor) = cursor else {
            let how = if log.kept.is_empty() {
                Resume::NothingKept
            } else {
                Resume::NoCursor
            };
            return (0, how);
        };
        if log.kept.is_empty() {
            return (0, Resume::NothingKept);
        }
        match position(&log.kept, cursor) {
            Some(p) => {
                // Every message after the cursor's came on its subscription, which is the
                // current one: nothing was lost in between.
                let epoch = log.kept[p].message.epoch;
                let whole =
                    log.kept.iter().skip(p).all(|k| k.message.epoch == epoch) && epoch >= log.epoch;
                let how = if whole {
                    Resume::AfterCursor
                } else {
                    Resume::AcrossGap
                };
                (p + 1, how)
            }
            None => (0, Resume::CursorNotFound),
        }
    }

    /// What this instance can say of each source, against the cursors `cursors[source]`.
    pub(crate) fn states(&self, cursors: &[Option<Cursor>], now: Instant) -> Vec<SourceState> {
        (0..self.sources.len())
            .map(|i| {
                let log = &self.sources[i];
                let (_, resume) = self.resume_point(i, cursors.get(i).and_then(Option::as_ref));
                SourceState {
                    resume,
                    kept: log.kept.len(),
                    whole: log
                        .whole_since()
                        .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
                }
            })
            .collect()
    }

    /// The messages to queue on taking the lease: for each source those after its cursor
    /// (`cursors[source]`), all in arrival order; and what was found of each cursor.
    pub(crate) fn after(self, cursors: &[Option<Cursor>]) -> (Vec<BusMessage>, Vec<Resume>) {
        let points: Vec<(usize, Resume)> = (0..self.sources.len())
            .map(|i| self.resume_point(i, cursors.get(i).and_then(Option::as_ref)))
            .collect();
        let mut out = Vec::new();
        for (log, (from, _)) in self.sources.into_iter().zip(&points) {
            out.extend(log.kept.into_iter().skip(*from).map(|k| k.message));
        }
        out.sort_by_key(|m| m.arrived);
        (out, points.into_iter().map(|(_, how)| how).collect())
    }
}

/// Where the cursor's last message stands: the earliest place where it follows the cursor's
/// `before` message, or else (its `before` older than what is kept, or none) the earliest place
/// it appears at all. Earliest, so that an ambiguity repeats messages rather than loses them.
fn position(kept: &VecDeque<Kept>, c: &Cursor) -> Option<usize> {
    let last = decode(&c.last)?;
    let before = c.before.as_deref().and_then(decode);
    let at = |i: usize| kept[i].digest == last;
    let verified = before.and_then(|b| (1..kept.len()).find(|&i| at(i) && kept[i - 1].digest == b));
    verified.or_else(|| (0..kept.len()).find(|&i| at(i)))
}

/// A cursor's hex digest as bytes; `None` when it is not one.
fn decode(hex_digest: &str) -> Option<[u8; 20]> {
    let mut out = [0u8; 20];
    hex::decode_to_slice(hex_digest, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::cursor::digest;

    fn at(source: u16, text: &str, arrived: Instant) -> BusMessage {
        on(source, text, arrived, 1)
    }

    fn on(source: u16, text: &str, arrived: Instant, epoch: u64) -> BusMessage {
        BusMessage {
            source,
            channel: "c".into(),
            payload: text.into(),
            arrived,
            epoch,
            position: None,
        }
    }

    fn texts(ms: &[BusMessage]) -> Vec<String> {
        ms.iter().map(|m| m.payload.to_string()).collect()
    }

    fn cursor(before: Option<&str>, last: &str) -> Option<Cursor> {
        Some(Cursor {
            before: before.map(digest),
            last: digest(last),
        })
    }

    #[test]
    fn resumes_each_source_after_its_cursor() {
        let t = Instant::now();
        let mut b = Backlog::new(2, Duration::from_secs(60), 1 << 20);
        for (i, (s, text)) in [
            (0, "a1"),
            (1, "b1"),
            (0, "a2"),
            (0, "a1"),
            (1, "b2"),
            (0, "a3"),
        ]
        .into_iter()
        .enumerate()
        {
            b.push(at(s, text, t + Duration::from_millis(i as u64)));
        }
        // Source 0 stopped after the second "a1" (the one after "a2"); source 1 never queued.
        let cursors = [cursor(Some("a2"), "a1"), None];
        let states = b.states(&cursors, t + Duration::from_millis(10));
        assert_eq!(states[0].resume, Resume::AfterCursor);
        assert_eq!(states[0].kept, 4);
        assert_eq!(
            states[0].whole,
            Duration::from_millis(10),
            "since subscribed"
        );
        assert_eq!(states[1].resume, Resume::NoCursor);
        let (out, how) = b.after(&cursors);
        assert_eq!(texts(&out), ["b1", "b2", "a3"]);
        assert_eq!(how, [Resume::AfterCursor, Resume::NoCursor]);
    }

    #[test]
    fn an_unknown_cursor_queues_everything_and_old_messages_go() {
        let t = Instant::now();
        let mut b = Backlog::new(1, Duration::from_secs(1), 10);
        b.push(at(0, "old", t));
        b.push(at(0, "x1", t + Duration::from_secs(2)));
        b.push(at(0, "x2", t + Duration::from_secs(2)));
        assert_eq!(b.len(), 2, "older than a second");
        b.push(at(0, "0123456789", t + Duration::from_secs(2)));
        assert_eq!(b.len(), 1, "more than 10 bytes");
        let cursors = [cursor(None, "gone")];
        let states = b.states(&cursors, t + Duration::from_secs(3));
        assert_eq!(states[0].resume, Resume::CursorNotFound);
        assert_eq!(
            states[0].whole,
            Duration::from_secs(1),
            "whole only after the last message let go"
        );
        let (out, how) = b.after(&cursors);
        assert_eq!(texts(&out), ["0123456789"]);
        assert_eq!(how, [Resume::CursorNotFound]);
        let (out, how) = Backlog::new(1, Duration::from_secs(1), 10).after(&cursors);
        assert!(out.is_empty());
        assert_eq!(how, [Resume::NothingKept]);
    }

    #[test]
    fn a_cursor_before_a_lost_subscription_is_found_across_a_gap() {
        let t = Instant::now();
        let ms = |n: u64| t + Duration::from_millis(n);
        let mut b = Backlog::new(1, Duration::from_secs(60), 1 << 20);
        b.push(on(0, "m1", ms(0), 1));
        b.push(on(0, "m2", ms(1), 1));
        let cursors = [cursor(Some("m1"), "m2")];
        assert_eq!(b.states(&cursors, ms(2))[0].resume, Resume::AfterCursor);
        // The subscription is made again: what came meanwhile is not here.
        b.subscribed(0, 2, ms(5));
        assert_eq!(b.states(&cursors, ms(6))[0].resume, Resume::AcrossGap);
        assert_eq!(b.states(&cursors, ms(6))[0].whole, Duration::from_millis(1));
        b.push(on(0, "m5", ms(7), 2));
        let (out, how) = b.after(&cursors);
        assert_eq!(texts(&out), ["m5"]);
        assert_eq!(how, [Resume::AcrossGap]);
        // A cursor after the gap is found whole.
        let mut b = Backlog::new(1, Duration::from_secs(60), 1 << 20);
        b.push(on(0, "m1", ms(0), 1));
        b.push(on(0, "m5", ms(7), 2));
        b.push(on(0, "m6", ms(8), 2));
        let after_gap = [cursor(None, "m5")];
        assert_eq!(b.states(&after_gap, ms(9))[0].resume, Resume::AfterCursor);
    }

    #[test]
    fn a_malformed_cursor_is_not_found() {
        let mut b = Backlog::new(1, Duration::from_secs(60), 1 << 20);
        b.push(at(0, "m1", Instant::now()));
        let bad = [Some(Cursor {
            before: None,
            last: "zz".into(),
        })];
        let (_, how) = b.after(&bad);
        assert_eq!(how, [Resume::CursorNotFound]);
    }
}

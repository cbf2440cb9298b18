//! One hook's queue in memory: a window over its Redis stream. At most [`WINDOW`] entries and
//! about [`WINDOW_BYTES`] of payload are held (plus one page being read); the rest of the queue (entries after them) is in Redis only, as a span of ids that
//! [`super::backlog`] pages in while the worker runs low. A restart starts with the whole
//! stream as that span; a burst that outruns the hook makes one. While a span exists, new
//! entries only extend it, so the order is always memory first, then the span.

use std::{
    collections::VecDeque,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::sync::Notify;

use super::{incident::Drops, journal::Entry};
use crate::fleet::lease::Lease;

/// Entries read from Redis at a time.
pub const PAGE: usize = 256;
/// Most entries held in memory per hook.
pub const WINDOW: usize = 2 * PAGE;
/// Payload bytes held in memory per hook beyond which new entries stay in Redis only (a
/// payload several hooks share counts for each of them). A window over large events is short.
pub const WINDOW_BYTES: usize = 256 * 1024;

/// Entries in Redis only: ids in `(after, until]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub after: Option<u64>,
    pub until: u64,
    /// How many (as far as known).
    pub count: usize,
}

#[derive(Default)]
struct Parts {
    mem: VecDeque<Entry>,
    /// Payload bytes of the entries in `mem`.
    bytes: usize,
    span: Option<Span>,
    /// The highest id this queue ever took (in memory, in the span or sent): an entry at or
    /// below it is one it has already (in a fleet, announced and pushed both).
    last: u64,
}

fn size(e: &Entry) -> usize {
    e.payload.text().len()
}

impl Parts {
    /// Entries wait in Redis and memory runs low.
    fn wants_page(&self) -> bool {
        self.span.is_some() && self.mem.len() < PAGE / 2 && self.bytes < WINDOW_BYTES / 2
    }

    fn full(&self) -> bool {
        self.mem.len() >= WINDOW || self.bytes >= WINDOW_BYTES
    }

    fn push_back(&mut self, e: Entry) {
        self.bytes += size(&e);
        self.mem.push_back(e);
    }

    fn pop_front(&mut self) -> Option<Entry> {
        let e = self.mem.pop_front()?;
        self.bytes -= size(&e);
        Some(e)
    }
}

/// What a push did.
#[derive(Default)]
pub struct Pushed {
    /// The oldest entries dropped to stay within `max`.
    pub dropped: Vec<Entry>,
    /// A span began: a pager must be started.
    pub spilled: bool,
}

#[derive(Default)]
pub struct HookQueue {
    parts: Mutex<Parts>,
    /// Wakes the worker: an entry or a page arrived, or the queue closed.
    pub ready: Notify,
    /// Wakes the pager: memory runs low.
    pub wants_page: Notify,
    /// Set when the hook is gone: the worker ends even if it is idle.
    closed: AtomicBool,
    /// In a fleet: the hook's delivery lease; nothing is sent once it is no longer held.
    lease: Option<Lease>,
    /// What the log said of dropped callbacks, to say it once a minute.
    drops: Mutex<Drops>,
}

impl HookQueue {
    /// A queue whose `count` entries, ids up to `until`, are in Redis only (after a restart).
    pub fn stored(until: u64, count: usize) -> Self {
        let q = Self::default();
        let mut p = q.lock();
        p.span = (count > 0).then_some(Span {
            after: None,
            until,
            count,
        });
        p.last = until;
        drop(p);
        q
    }

    /// A queue as [`stored`](Self::stored), sent only while `lease` is held.
    pub fn leased(lease: Lease, until: u64, count: usize) -> Self {
        Self {
            lease: Some(lease),
            ..Self::stored(until, count)
        }
    }

    /// Entries up to id `until` were written to Redis by another instance (about `count` of
    /// them): those not already known join (or start) the span. Returns whether a span began
    /// (a pager must be started).
    pub fn extend(&self, until: u64, count: usize) -> bool {
        let mut p = self.lock();
        if until <= p.last {
            return false;
        }
        let after = p.last;
        p.last = until;
        let began = match &mut p.span {
            Some(span) => {
                span.until = until;
                span.count += count.max(1);
                false
            }
            None => {
                p.span = Some(Span {
                    after: Some(after),
                    until,
                    count: count.max(1),
                });
                true
            }
        };
        drop(p);
        self.wants_page.notify_one();
        began
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parts> {
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an entry already written to Redis: held in memory while there is room and nothing
    /// waits in Redis, else it joins (or starts) the span. Then the oldest entries in memory
    /// are dropped while more than `max` are queued in all.
    pub fn push(&self, entry: Entry, max: usize) -> Pushed {
        let mut p = self.lock();
        let mut out = Pushed::default();
        if entry.ts <= p.last {
            return out;
        }
        p.last = entry.ts;
        let last_in_memory = p.mem.back().map(|e| e.ts);
        let full = p.full();
        match &mut p.span {
            Some(span) => {
                span.until = entry.ts;
                span.count += 1;
            }
            None if full => {
                p.span = Some(Span {
                    after: last_in_memory,
                    until: entry.ts,
                    count: 1,
                });
                out.spilled = true;
            }
            None => p.push_back(entry),
        }
        let total = p.mem.len() + p.span.map_or(0, |s| s.count);
        let excess = total.saturating_sub(max).min(p.mem.len());
        out.dropped = (0..excess).filter_map(|_| p.pop_front()).collect();
        drop(p);
        self.ready.notify_one();
        out
    }

    /// The span to read next, if any.
    pub fn span(&self) -> Option<Span> {
        self.lock().span
    }

    /// Notes `n` callbacks dropped, the oldest `oldest` (event id, timestamp): the dropped count
    /// since the last line and the oldest lost when a line is due (one a minute).
    pub fn note_drops(&self, n: u64, oldest: (String, u64)) -> Option<(u64, (String, u64))> {
        self.drops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped(std::time::Instant::now(), n, oldest)
    }

    /// Entries queued in all, memory and Redis.
    pub fn total(&self) -> usize {
        let p = self.lock();
        p.mem.len() + p.span.map_or(0, |s| s.count)
    }

    /// Adds a page read from the span: `read` entries were read up to id `last` (`entries` of
    /// them usable); `complete` when the read reached the span's end as it was then (`until`).
    /// Returns whether a span remains.
    pub fn add_page(
        &self,
        entries: Vec<Entry>,
        read: usize,
        last: Option<u64>,
        complete: Option<u64>,
    ) -> bool {
        let mut p = self.lock();
        for e in entries {
            p.push_back(e);
        }
        if let Some(span) = &mut p.span {
            span.after = last.or(span.after);
            span.count = span.count.saturating_sub(read);
            if complete == Some(span.until) {
                p.span = None;
            }
        }
        let more = p.span.is_some();
        drop(p);
        self.ready.notify_one();
        more
    }

    /// The next entry in order; `None` when there is none in memory yet.
    pub fn pop(&self) -> Option<Entry> {
        let mut p = self.lock();
        let e = p.pop_front();
        if p.wants_page() {
            self.wants_page.notify_one();
        }
        e
    }

    /// Whether the pager should read another page now.
    pub fn wants_more(&self) -> bool {
        self.lock().wants_page()
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
        self.wants_page.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether its worker may send: the queue is open and, in a fleet, its lease held.
    pub fn may_send(&self) -> bool {
        !self.is_closed() && self.lease.as_ref().is_none_or(Lease::is_held)
    }

    /// Entries held in memory.
    pub fn in_memory(&self) -> usize {
        self.lock().mem.len()
    }

    /// Payload bytes held in memory.
    pub fn bytes_in_memory(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::Payload;

    fn entry(ts: u64) -> Entry {
        sized(ts, 2)
    }

    fn sized(ts: u64, bytes: usize) -> Entry {
        Entry {
            ts,
            payload: Arc::new(Payload::new("x".repeat(bytes))),
            event_id: "e".into(),
            arrived: None,
            shared: None,
            source: 0,
        }
    }

    fn order(q: &HookQueue) -> Vec<u64> {
        std::iter::from_fn(|| q.pop()).map(|e| e.ts).collect()
    }

    #[test]
    fn fresh_entries_wait_behind_the_stored_ones() {
        let q = HookQueue::stored(3, 3);
        assert!(q.push(entry(10), 100).dropped.is_empty());
        assert!(q.pop().is_none(), "nothing before the first page");
        assert_eq!(q.span().map(|s| (s.until, s.count)), Some((10, 4)));
        assert!(q.add_page(vec![entry(1), entry(2)], 2, Some(2), None));
        q.push(entry(11), 100);
        assert_eq!(order(&q), [1, 2], "then it waits for the next page");
        // A read up to 10 that came back short: 11 joined the span meanwhile, so it goes on.
        assert!(q.add_page(vec![entry(3), entry(10)], 2, Some(10), Some(10)));
        assert!(!q.add_page(vec![entry(11)], 1, Some(11), Some(11)));
        assert_eq!(order(&q), [3, 10, 11]);
        q.push(entry(12), 100);
        assert_eq!(order(&q), [12], "no span: held in memory again");
    }

    #[test]
    fn announced_and_pushed_entries_are_taken_once_in_order() {
        let q = HookQueue::stored(5, 0);
        assert!(q.span().is_none(), "an empty stream: nothing to read");
        assert!(q.push(entry(5), 100).dropped.is_empty());
        assert_eq!(q.total(), 0, "at or below the stream's end: had already");
        assert!(q.extend(8, 3), "written elsewhere: a span to read begins");
        assert!(!q.extend(7, 1), "an older announcement changes nothing");
        assert_eq!(q.span().map(|s| (s.after, s.until)), Some((Some(5), 8)));
        q.push(entry(8), 100);
        q.push(entry(9), 100);
        assert_eq!(q.span().map(|s| s.until), Some(9), "fresh ones wait behind");
        assert!(!q.add_page(
            vec![entry(6), entry(7), entry(8), entry(9)],
            4,
            Some(9),
            Some(9)
        ));
        assert_eq!(order(&q), [6, 7, 8, 9]);
        assert!(!q.extend(9, 1), "announced after it was pushed: once only");
        q.push(entry(10), 100);
        assert_eq!(order(&q), [10]);
    }

    #[test]
    fn a_burst_beyond_the_window_spills_to_redis_in_order() {
        let q = HookQueue::default();
        for ts in 1..=WINDOW as u64 {
            assert!(!q.push(entry(ts), 100_000).spilled);
        }
        assert!(q.push(entry(1000), 100_000).spilled, "a span begins");
        assert!(!q.push(entry(1001), 100_000).spilled, "and grows");
        let span = q.span().expect("span");
        assert_eq!(
            (span.after, span.until, span.count),
            (Some(WINDOW as u64), 1001, 2)
        );
        assert_eq!(q.in_memory(), WINDOW);
        assert_eq!(q.total(), WINDOW + 2);
        assert_eq!(order(&q).len(), WINDOW);
        assert!(q.wants_more());
    }

    #[test]
    fn the_oldest_in_memory_are_dropped_when_full() {
        let q = HookQueue::default();
        assert!(q.push(entry(10), 2).dropped.is_empty());
        assert!(q.push(entry(11), 2).dropped.is_empty());
        let dropped = q.push(entry(12), 2).dropped;
        assert_eq!(dropped.iter().map(|e| e.ts).collect::<Vec<_>>(), [10]);
        assert_eq!(order(&q), [11, 12]);
    }

    #[test]
    fn large_payloads_spill_by_bytes_and_are_counted_out_again() {
        let q = HookQueue::default();
        let big = WINDOW_BYTES / 4;
        for ts in 1..=4 {
            assert!(!q.push(sized(ts, big), 100).spilled);
        }
        assert_eq!(q.bytes_in_memory(), WINDOW_BYTES);
        assert!(
            q.push(sized(5, 10), 100).spilled,
            "full by bytes, not count"
        );
        assert_eq!(q.in_memory(), 4);
        assert!(!q.wants_more(), "memory is not low yet");
        assert_eq!(q.pop().map(|e| e.ts), Some(1));
        assert_eq!(q.pop().map(|e| e.ts), Some(2));
        assert_eq!(q.pop().map(|e| e.ts), Some(3));
        assert!(q.wants_more(), "below half the budget: read a page");
        assert!(!q.add_page(vec![sized(5, 10)], 1, Some(5), Some(5)));
        assert_eq!(order(&q), [4, 5]);
        assert_eq!(q.bytes_in_memory(), 0);
        // Dropping the oldest to stay within max_queue counts their bytes out too.
        q.push(sized(6, 100), 1);
        assert_eq!(q.push(sized(7, 30), 1).dropped.len(), 1);
        assert_eq!(q.bytes_in_memory(), 30);
    }
}

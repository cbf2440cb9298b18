//! One hook's queue in memory: a window over its Redis stream. At most [`WINDOW`] entries and
//! about [`WINDOW_BYTES`] of payload are held (plus one page being read); the rest of the queue (entries after them) is in Redis only, as a span of ids that
//! [`super::pager`] pages in while the worker runs low. A restart starts with the whole
//! stream as that span; a burst that outruns the hook makes one. While a span exists, new
//! entries only extend it, so the order is always memory first, then the span.

use std::{
    collections::VecDeque,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::sync::Notify;

use super::{
    budget::{Account, UNKNOWN_COST},
    incident::Drops,
    journal::{Entry, Position},
};
use crate::fleet::Lease;

/// Entries read from Redis at a time. A hook reading its queue back holds between half a page
/// and a page and a half: pages of 128 rather than 256 took a 100-hook burst's anonymous peak
/// to 0.83 at the same CPU (BENCHMARKS.md, issue 63).
pub(crate) const PAGE: usize = 128;
/// Most entries the stage hands a hook's memory before they stay in Redis only (a page read
/// in may take it to half as many again). One page: with many hooks the windows are the
/// largest part of a burst's memory (about 100 bytes an entry), while a window of more
/// entries saves only the reading back of a burst's first entries.
pub(crate) const WINDOW: usize = PAGE;
/// The room in entries an emptied window keeps; a larger one, grown by a burst, is given back.
const KEPT_ROOM: usize = 16;
/// Payload bytes held in memory per hook beyond which new entries stay in Redis only (a
/// payload several hooks share counts for each of them). A window over large events is short.
pub(crate) const WINDOW_BYTES: usize = 256 * 1024;

/// Entries in Redis only: ids in `(after, until]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub(super) after: Option<u64>,
    pub(super) until: u64,
    /// How many (as far as known).
    count: usize,
    /// Their estimated bytes in Redis ([`super::budget::cost`]).
    cost: u64,
}

/// An entry in memory and its estimated bytes in Redis.
struct Queued {
    entry: Entry,
    cost: u64,
}

#[derive(Default)]
struct Parts {
    mem: VecDeque<Queued>,
    /// Payload bytes of the entries in `mem`.
    bytes: usize,
    /// Estimated Redis bytes of the entries in `mem`.
    cost: u64,
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

    fn push_back(&mut self, entry: Entry, cost: u64) {
        self.bytes += size(&entry);
        self.cost += cost;
        self.mem.push_back(Queued { entry, cost });
    }

    fn pop_front(&mut self) -> Option<Queued> {
        let q = self.mem.pop_front()?;
        self.bytes -= size(&q.entry);
        self.cost -= q.cost;
        if self.mem.is_empty() && self.mem.capacity() > KEPT_ROOM {
            // A burst's window is not held for good by every hook it went to.
            self.mem.shrink_to(KEPT_ROOM);
        }
        Some(q)
    }

    /// Estimated Redis bytes of the whole queue.
    fn taken(&self) -> u64 {
        self.cost + self.span.map_or(0, |s| s.cost)
    }
}

/// The queue's parts locked for a change, and the budget of all queues told what they take
/// when it ends ([`Edit::settle`] tells it earlier): the only way to change them, so that no
/// change can leave the budget, which decides what every hook drops, behind.
struct Edit<'a> {
    parts: MutexGuard<'a, Parts>,
    budget: &'a Account,
    /// What the queue took when the budget was last told.
    told: u64,
}

impl std::ops::Deref for Edit<'_> {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.parts
    }
}

impl std::ops::DerefMut for Edit<'_> {
    fn deref_mut(&mut self) -> &mut Parts {
        &mut self.parts
    }
}

impl Drop for Edit<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Edit<'_> {
    /// Tells the budget what the queue takes now.
    fn settle(&mut self) {
        let now = self.parts.taken();
        self.budget.moved(self.told, now);
        self.told = now;
    }

    /// Drops the oldest in memory while the queue holds more than `max` entries in all or, by
    /// the budget, more than its share of it.
    fn trim(&mut self, max: usize, out: &mut Pushed) {
        let total = self.mem.len() + self.span.map_or(0, |s| s.count);
        for _ in 0..total.saturating_sub(max) {
            match self.pop_front() {
                Some(q) => out.dropped.push(q.entry),
                None => break,
            }
        }
        self.settle();
        let mut give = self.budget.excess(self.taken());
        while give > 0 {
            let Some(q) = self.pop_front() else { break };
            self.settle();
            give = give.saturating_sub(q.cost);
            out.dropped.push(q.entry);
            out.by_budget = true;
        }
    }
}

/// What to drop before a page is added ([`HookQueue::make_room`]).
pub(crate) struct PageDrops {
    /// Dropped from memory (older than the page).
    pub(super) from_memory: Vec<Entry>,
    /// How many of the page's first entries to drop.
    pub(super) from_page: usize,
    /// The budget of all queues took some, not only `max`.
    pub(super) by_budget: bool,
}

/// What a push did.
#[derive(Default)]
pub(crate) struct Pushed {
    /// The oldest entries dropped to stay within `max` or the budget.
    pub(super) dropped: Vec<Entry>,
    /// Some were dropped for the budget of all queues (not only `max`).
    pub(super) by_budget: bool,
    /// A span began: a pager must be started.
    pub(super) spilled: bool,
}

pub(crate) struct HookQueue {
    parts: Mutex<Parts>,
    /// Wakes the worker: an entry or a page arrived, or the queue closed.
    pub(super) ready: Notify,
    /// Wakes the pager: memory runs low.
    pub(super) wants_page: Notify,
    /// Set when the hook is gone: the worker ends even if it is idle.
    closed: AtomicBool,
    /// In a fleet: the hook's delivery lease; nothing is sent once it is no longer held.
    lease: Option<Lease>,
    /// What the log said of dropped callbacks, to say it once a minute.
    drops: Mutex<Drops>,
    /// Removals from Redis of dropped entries still under way: each drop counts one from the
    /// moment it is decided until [`removal_done`](Self::removal_done). The worker marks no
    /// delivery meanwhile ([`removals_done`](Self::removals_done)), so that the hook's cursor
    /// never passes a dropped entry before it is removed (and its payload record released).
    removing: AtomicUsize,
    removed: Notify,
    /// The budget of all queues, told what this one takes, for its owner.
    budget: Account,
}

impl Default for HookQueue {
    /// An empty queue without a budget.
    fn default() -> Self {
        Self::new(Account::default())
    }
}

impl Drop for HookQueue {
    fn drop(&mut self) {
        self.budget.moved(self.lock().taken(), 0);
    }
}

impl HookQueue {
    /// An empty queue within `budget` (its owner's account).
    pub(crate) fn new(budget: impl Into<Account>) -> Self {
        let budget = budget.into();
        Self {
            parts: Mutex::default(),
            ready: Notify::new(),
            wants_page: Notify::new(),
            closed: AtomicBool::new(false),
            lease: None,
            drops: Mutex::default(),
            removing: AtomicUsize::new(0),
            removed: Notify::new(),
            budget,
        }
    }

    /// A queue within `budget` whose waiting entries (`pos`: `length` of them, ids after its
    /// cursor and up to `last_ts`) are in Redis only (after a restart).
    pub(crate) fn stored(budget: impl Into<Account>, pos: Position) -> Self {
        let q = Self::new(budget);
        let mut p = q.edit();
        p.span = (pos.length > 0).then_some(Span {
            after: pos.after(),
            until: pos.last_ts,
            count: pos.length,
            cost: pos.length as u64 * UNKNOWN_COST,
        });
        p.last = pos.last_ts;
        drop(p);
        q
    }

    /// A queue as [`stored`](Self::stored), sent only while `lease` is held.
    pub(crate) fn leased(budget: impl Into<Account>, lease: Lease, pos: Position) -> Self {
        let mut q = Self::stored(budget, pos);
        q.lease = Some(lease);
        q
    }

    /// Entries up to id `until` were written to Redis by another instance (about `count` of
    /// them): those not already known join (or start) the span. Returns whether a span began
    /// (a pager must be started).
    pub(crate) fn extend(&self, until: u64, count: usize) -> bool {
        let mut p = self.edit();
        if until <= p.last {
            return false;
        }
        let after = p.last;
        p.last = until;
        let (count, cost) = (count.max(1), count.max(1) as u64 * UNKNOWN_COST);
        let began = match &mut p.span {
            Some(span) => {
                span.until = until;
                span.count += count;
                span.cost += cost;
                false
            }
            None => {
                p.span = Some(Span {
                    after: Some(after),
                    until,
                    count,
                    cost,
                });
                true
            }
        };
        drop(p);
        self.wants_page.notify_one();
        began
    }

    /// The parts, to read. (A `&Parts`: a change goes through [`Self::edit`].)
    fn lock(&self) -> impl std::ops::Deref<Target = Parts> + '_ {
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The parts, to change, the budget kept by the [`Edit`].
    fn edit(&self) -> Edit<'_> {
        let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        let told = parts.taken();
        Edit {
            parts,
            budget: &self.budget,
            told,
        }
    }

    /// Adds an entry already written to Redis, taking `cost` bytes there: held in memory while
    /// there is room and nothing waits in Redis, else it joins (or starts) the span. Then the
    /// oldest entries in memory are dropped while more than `max` are queued in all, or while
    /// the queues are over their budget and this one holds more than its share.
    pub(crate) fn push(&self, entry: Entry, cost: u64, max: usize) -> Pushed {
        let mut p = self.edit();
        let mut out = Pushed::default();
        if entry.ts <= p.last {
            return out;
        }
        p.last = entry.ts;
        let last_in_memory = p.mem.back().map(|q| q.entry.ts);
        let full = p.full();
        match &mut p.span {
            Some(span) => {
                span.until = entry.ts;
                span.count += 1;
                span.cost += cost;
            }
            None if full => {
                p.span = Some(Span {
                    after: last_in_memory,
                    until: entry.ts,
                    count: 1,
                    cost,
                });
                out.spilled = true;
            }
            None => p.push_back(entry, cost),
        }
        p.trim(max, &mut out);
        if !out.dropped.is_empty() {
            self.removing.fetch_add(1, Ordering::AcqRel);
        }
        drop(p);
        self.ready.notify_one();
        out
    }

    /// The removal of a drop ([`push`](Self::push) or [`make_room`](Self::make_room) dropped
    /// something) is done, or given up because the relay stops.
    pub(crate) fn removal_done(&self) {
        if self.removing.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.removed.notify_waiters();
        }
    }

    /// Waits until no removal of dropped entries is under way; `false` when the relay stops
    /// first.
    pub(crate) async fn removals_done(&self, token: &tokio_util::sync::CancellationToken) -> bool {
        // Every callback asks; a drop is rare: no waiter is registered unless one is under way.
        if self.removing.load(Ordering::Acquire) == 0 {
            return true;
        }
        loop {
            let removed = self.removed.notified();
            tokio::pin!(removed);
            removed.as_mut().enable();
            if self.removing.load(Ordering::Acquire) == 0 {
                return true;
            }
            tokio::select! {
                () = removed => {}
                () = token.cancelled() => return false,
            }
        }
    }

    /// The span to read next, if any.
    pub(crate) fn span(&self) -> Option<Span> {
        self.lock().span
    }

    /// Notes `n` callbacks dropped, the oldest `oldest` (event id, timestamp): the dropped count
    /// since the last line and the oldest lost when a line is due (one a minute).
    pub(crate) fn note_drops(&self, n: u64, oldest: (String, u64)) -> Option<(u64, (String, u64))> {
        self.drops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped(std::time::Instant::now(), n, oldest)
    }

    /// Makes room before a page of `read` entries (the oldest in Redis) is added: drops the
    /// oldest in memory, then says how many of the page's first entries to drop, while the queue
    /// holds more than `max` entries in all or, over the budget, more than its share.
    pub(crate) fn make_room(&self, read: usize, max: usize) -> PageDrops {
        let mut p = self.edit();
        let mut out = Pushed::default();
        p.trim(max, &mut out);
        let total = p.mem.len() + p.span.map_or(0, |s| s.count);
        let by_count = total.saturating_sub(max);
        let each = p
            .span
            .map_or(UNKNOWN_COST, |s| (s.cost / s.count.max(1) as u64).max(1));
        let by_budget = self.budget.excess(p.taken()).div_ceil(each) as usize;
        let from_page = by_count.max(by_budget).min(read);
        if !out.dropped.is_empty() || from_page > 0 {
            self.removing.fetch_add(1, Ordering::AcqRel);
        }
        PageDrops {
            from_memory: out.dropped,
            from_page,
            by_budget: out.by_budget || (from_page > 0 && by_budget > by_count),
        }
    }

    /// Entries queued in all, memory and Redis.
    pub(crate) fn total(&self) -> usize {
        let p = self.lock();
        p.mem.len() + p.span.map_or(0, |s| s.count)
    }

    /// Adds a page read from the span: `read` entries were read up to id `last` (`entries` of
    /// them usable); `complete` when the read reached the span's end as it was then (`until`).
    /// Returns whether a span remains.
    /// Each entry read takes the span's average cost along, so the queue's total is kept.
    pub(crate) fn add_page(
        &self,
        entries: Vec<Entry>,
        read: usize,
        last: Option<u64>,
        complete: Option<u64>,
    ) -> bool {
        let mut p = self.edit();
        let each = p
            .span
            .map_or(UNKNOWN_COST, |s| s.cost / s.count.max(1) as u64);
        for e in entries {
            p.push_back(e, each);
        }
        if let Some(span) = &mut p.span {
            span.after = last.or(span.after);
            span.count = span.count.saturating_sub(read);
            span.cost = span.cost.saturating_sub(each * read as u64);
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
    pub(crate) fn pop(&self) -> Option<Entry> {
        let mut p = self.edit();
        let e = p.pop_front().map(|q| q.entry);
        if p.wants_page() {
            self.wants_page.notify_one();
        }
        e
    }

    /// Whether the pager should read another page now.
    pub(crate) fn wants_more(&self) -> bool {
        self.lock().wants_page()
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
        self.wants_page.notify_one();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether its worker may send: the queue is open and, in a fleet, its lease held.
    pub(crate) fn may_send(&self) -> bool {
        !self.is_closed() && self.lease.as_ref().is_none_or(Lease::is_held)
    }

    /// Entries held in memory.
    #[cfg(test)]
    pub(crate) fn in_memory(&self) -> usize {
        self.lock().mem.len()
    }

    /// Entries the memory has room for without growing.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.lock().mem.capacity()
    }

    /// Payload bytes held in memory.
    #[cfg(test)]
    pub(crate) fn bytes_in_memory(&self) -> usize {
        self.lock().bytes
    }

    /// Estimated Redis bytes of the whole queue, as the budget should know them.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> u64 {
        self.lock().taken()
    }
}

#[cfg(test)]
mod tests;

//! One hook's queue in memory: the entries read back from Redis after a restart (the backlog,
//! paged in by [`super::backlog`]) go first, then the fresh ones from the bus. Only the fresh
//! part is bounded by `delivery.max_queue` (the backlog is read a page at a time).

use std::{
    collections::VecDeque,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::sync::Notify;

use super::journal::Entry;

/// Backlog entries held in memory per hook while its stream is paged in.
pub const PAGE: usize = 256;

#[derive(Default)]
struct Parts {
    backlog: VecDeque<Entry>,
    fresh: VecDeque<Entry>,
    /// Pages are still to come: fresh entries wait behind them.
    recovering: bool,
}

#[derive(Default)]
pub struct HookQueue {
    parts: Mutex<Parts>,
    /// Wakes the worker: an entry or a page arrived, or the queue closed.
    pub ready: Notify,
    /// Wakes the pager: the backlog runs low.
    pub wants_page: Notify,
    /// Set when the hook is gone: the worker ends even if it is idle.
    closed: AtomicBool,
}

impl HookQueue {
    /// A queue whose first entries are still in Redis.
    pub fn recovering() -> Self {
        let q = Self::default();
        q.lock().recovering = true;
        q
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parts> {
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a fresh entry; returns the fresh entries dropped to stay within `max`.
    pub fn push(&self, entry: Entry, max: usize) -> Vec<Entry> {
        let mut p = self.lock();
        p.fresh.push_back(entry);
        let excess = p.fresh.len().saturating_sub(max);
        let dropped = p.fresh.drain(..excess).collect();
        drop(p);
        self.ready.notify_one();
        dropped
    }

    /// Adds a page of the backlog; `last` when the stream has no more.
    pub fn add_page(&self, entries: Vec<Entry>, last: bool) {
        let mut p = self.lock();
        p.backlog.extend(entries);
        if last {
            p.recovering = false;
        }
        drop(p);
        self.ready.notify_one();
    }

    /// The next entry in order; `None` when there is none yet.
    pub fn pop(&self) -> Option<Entry> {
        let mut p = self.lock();
        if let Some(e) = p.backlog.pop_front() {
            if p.recovering && p.backlog.len() < PAGE / 2 {
                self.wants_page.notify_one();
            }
            return Some(e);
        }
        if p.recovering {
            self.wants_page.notify_one();
            return None;
        }
        p.fresh.pop_front()
    }

    pub fn backlog_len(&self) -> usize {
        self.lock().backlog.len()
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
        self.wants_page.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Entries in memory.
    pub fn in_memory(&self) -> usize {
        let p = self.lock();
        p.backlog.len() + p.fresh.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::Payload;

    fn entry(ts: u64) -> Entry {
        Entry {
            ts,
            payload: Arc::new(Payload::new("{}")),
            event_id: "e".into(),
            arrived: None,
            shared: None,
        }
    }

    fn order(q: &HookQueue) -> Vec<u64> {
        std::iter::from_fn(|| q.pop()).map(|e| e.ts).collect()
    }

    #[test]
    fn fresh_entries_wait_behind_the_whole_backlog() {
        let q = HookQueue::recovering();
        q.push(entry(10), 100);
        assert!(q.pop().is_none(), "nothing before the first page");
        q.add_page(vec![entry(1), entry(2)], false);
        q.push(entry(11), 100);
        assert_eq!(order(&q), [1, 2], "then it waits for the next page");
        q.add_page(vec![entry(3)], true);
        assert_eq!(order(&q), [3, 10, 11]);
    }

    #[test]
    fn only_fresh_entries_are_dropped_when_full() {
        let q = HookQueue::recovering();
        q.add_page((1..=5).map(entry).collect(), true);
        assert!(q.push(entry(10), 2).is_empty());
        assert!(q.push(entry(11), 2).is_empty());
        let dropped = q.push(entry(12), 2);
        assert_eq!(dropped.iter().map(|e| e.ts).collect::<Vec<_>>(), [10]);
        assert_eq!(order(&q), [1, 2, 3, 4, 5, 11, 12]);
    }
}

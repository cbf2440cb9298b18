//! Acknowledgements of delivered callbacks, taken off the hot path: a worker records a 2xx and
//! goes on to its next callback; one flusher task marks the recorded entries delivered in the
//! hooks' Redis streams (their cursors move) in one pipeline per round, for every hook at once. A worker sends its next
//! callback only while fewer than `delivery.max_unacked` of its delivered callbacks wait for
//! that removal, so a crash repeats at most `max_unacked` callbacks per hook (the one in flight
//! included); with 1, each removal is confirmed before the next callback, as it used to be. A
//! round waits until some hook has a quarter of its `max_unacked` recorded, or [`GATHER`]
//! passed, so that a busy hook's removals go in one write per several callbacks rather than
//! one each; a quarter, not a half, so that a busy worker rarely reaches `max_unacked` while
//! a round is being written. A graceful stop flushes everything the workers recorded before
//! the flusher ends.

use crate::base::ids::HookId;

use std::{
    collections::HashMap,
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use crate::store_conn::StoreConn;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::journal;
use crate::shutdown::retry_until_ok;

/// How long recorded acknowledgements may wait for more before they are written (while no
/// hook has a quarter of its `max_unacked` recorded).
const GATHER: Duration = Duration::from_millis(1);

/// Per hook, its delivered entries: `(timestamp, shared payload record)`.
type Delivered = HashMap<HookId, Vec<journal::Removal>>;

/// Recorded acknowledgements and the number of the flush that will take them.
#[derive(Default)]
struct Pending {
    entries: Delivered,
    /// The flush that takes what is recorded now (flushes are numbered from 1).
    next_flush: u64,
    /// The most entries one hook has recorded since the last take.
    most: usize,
}

/// Shared by the workers (record, wait) and the flusher (write).
pub(crate) struct Acker {
    pending: Mutex<Pending>,
    wake: Notify,
    /// Some hook has [`Acker::gather`] entries recorded: write them now.
    gathered: Notify,
    /// A quarter of `max_unacked` (at least 1).
    gather: usize,
    /// The number of the last flush written to Redis.
    done: watch::Sender<u64>,
    /// Workers alive: the flusher ends only once they are all gone and nothing is pending.
    workers: AtomicUsize,
    max_unacked: usize,
}

impl Acker {
    pub(crate) fn new(max_unacked: usize) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(Pending {
                entries: HashMap::new(),
                next_flush: 1,
                most: 0,
            }),
            wake: Notify::new(),
            gathered: Notify::new(),
            gather: (max_unacked / 4).max(1),
            done: watch::channel(0).0,
            workers: AtomicUsize::new(0),
            max_unacked: max_unacked.max(1),
        })
    }

    /// Records that `hook`'s entry `ts` (referring to shared payload `shared`) was delivered;
    /// returns the flush that will remove it.
    fn record(&self, hook: HookId, removal: journal::Removal) -> u64 {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let list = p.entries.entry(hook).or_default();
        list.push(removal);
        let len = list.len();
        p.most = p.most.max(len);
        let flush = p.next_flush;
        drop(p);
        self.wake.notify_one();
        if len == self.gather {
            self.gathered.notify_one();
        }
        flush
    }

    /// Takes everything recorded, with the number of this flush.
    fn take(&self) -> (u64, Delivered) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let flush = p.next_flush;
        p.next_flush += 1;
        p.most = 0;
        (flush, std::mem::take(&mut p.entries))
    }

    /// Whether some hook has a quarter of its `max_unacked` recorded.
    fn is_gathered(&self) -> bool {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).most >= self.gather
    }

    fn is_idle(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .is_empty()
    }

    /// Waits until every acknowledgement recorded so far is written to Redis (before a hook's
    /// delivery lease is given up, so that its next deliverer does not send them again).
    pub(crate) async fn flushed(&self) {
        let target = {
            let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.entries.is_empty() {
                p.next_flush - 1
            } else {
                p.next_flush
            }
        };
        let mut done = self.done.subscribe();
        while *done.borrow_and_update() < target {
            if done.changed().await.is_err() {
                return;
            }
        }
    }

    /// A worker's handle; counts it alive until dropped.
    pub(crate) fn worker(self: &Arc<Self>, hook: HookId) -> WorkerAcks {
        self.workers.fetch_add(1, Ordering::AcqRel);
        WorkerAcks {
            acker: self.clone(),
            hook,
            unconfirmed: VecDeque::new(),
            done: self.done.subscribe(),
        }
    }

    /// Writes recorded acknowledgements until the relay stops, the workers are gone and nothing
    /// is left to write.
    pub(crate) async fn run(self: Arc<Self>, conn: StoreConn, token: CancellationToken) {
        loop {
            if !self.is_idle() {
                if !self.is_gathered() && !token.is_cancelled() {
                    // Let more gather (a worker waits only once it has max_unacked recorded).
                    tokio::select! {
                        () = self.gathered.notified() => {}
                        () = tokio::time::sleep(GATHER) => {}
                        () = token.cancelled() => {}
                    }
                }
                let (flush, entries) = self.take();
                let mut pipe = redis::pipe();
                let hooks: Vec<journal::HookRemovals<'_>> =
                    entries.iter().map(|(h, d)| (*h, d.as_slice())).collect();
                journal::add_delivered(&mut pipe, &hooks, conn.is_cluster());
                let written = retry_until_ok(&token, "mark delivered callbacks", || {
                    let (mut c, pipe) = (conn.clone(), &pipe);
                    async move { journal::send_removals(&mut c, pipe).await }
                })
                .await;
                if written.is_none() {
                    tracing::warn!(
                        hooks = entries.len(),
                        "stopping with delivered callbacks not marked in Redis: they will be sent again after the restart"
                    );
                    return;
                }
                self.done.send_replace(flush);
                continue;
            }
            if token.is_cancelled() && self.workers.load(Ordering::Acquire) == 0 {
                return;
            }
            if token.is_cancelled() {
                // Stopping: look again now and then for workers that have ended.
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
            } else {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = token.cancelled() => {}
                }
            }
        }
    }
}

/// One worker's view: its acknowledgements not yet confirmed written.
pub(crate) struct WorkerAcks {
    acker: Arc<Acker>,
    hook: HookId,
    /// Flush numbers of its delivered entries not yet written, oldest first.
    unconfirmed: VecDeque<u64>,
    done: watch::Receiver<u64>,
}

impl WorkerAcks {
    /// Records a delivered entry.
    pub(crate) fn delivered(&mut self, removal: journal::Removal) {
        let flush = self.acker.record(self.hook, removal);
        self.unconfirmed.push_back(flush);
    }

    /// Waits until another callback may be sent: fewer than `max_unacked` delivered entries
    /// unwritten. `false` when the relay stops first.
    pub(crate) async fn ready_for_next(&mut self, token: &CancellationToken) -> bool {
        loop {
            let done = *self.done.borrow_and_update();
            while self.unconfirmed.front().is_some_and(|f| *f <= done) {
                self.unconfirmed.pop_front();
            }
            // With one callback about to be in flight, at most max_unacked may go unwritten.
            if self.unconfirmed.len() < self.acker.max_unacked {
                return true;
            }
            tokio::select! {
                r = self.done.changed() => if r.is_err() { return false },
                () = token.cancelled() => return false,
            }
        }
    }
}

impl Drop for WorkerAcks {
    fn drop(&mut self) {
        self.acker.workers.fetch_sub(1, Ordering::AcqRel);
        self.acker.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{RecordRef, StreamId};

    fn removal(ts: u64, shared: Option<u64>) -> journal::Removal {
        journal::Removal {
            id: StreamId(ts),
            shared: shared.map(RecordRef),
        }
    }

    #[test]
    fn flush_numbers_follow_the_takes() {
        let a = Acker::new(2);
        let mut w = a.worker(HookId(7));
        w.delivered(removal(10, None));
        w.delivered(removal(11, Some(5)));
        let (flush, entries) = a.take();
        assert_eq!(flush, 1);
        assert_eq!(
            entries[&HookId(7)],
            [removal(10, None), removal(11, Some(5))]
        );
        w.delivered(removal(12, None));
        assert_eq!(w.unconfirmed, [1, 1, 2]);
        assert!(!a.is_idle());
    }

    #[test]
    fn a_round_is_gathered_once_a_hook_has_a_quarter_of_its_max_unacked() {
        let a = Acker::new(16);
        let (mut w1, mut w2) = (a.worker(HookId(1)), a.worker(HookId(2)));
        for ts in 0..3 {
            w1.delivered(removal(ts, None));
            w2.delivered(removal(ts, None));
        }
        assert!(!a.is_gathered(), "3 each of 16: more may gather");
        w2.delivered(removal(3, None));
        assert!(a.is_gathered(), "4 for one hook: write now");
        let _ = a.take();
        assert!(!a.is_gathered(), "counted again after each take");
        let strict = Acker::new(1);
        strict.worker(HookId(1)).delivered(removal(1, None));
        assert!(strict.is_gathered(), "max_unacked = 1: each one at once");
    }

    #[tokio::test]
    async fn a_worker_waits_only_when_max_unacked_are_unwritten() {
        let a = Acker::new(2);
        let mut w = a.worker(HookId(1));
        w.delivered(removal(1, None));
        let token = CancellationToken::new();
        assert!(
            w.ready_for_next(&token).await,
            "one unwritten of two allowed"
        );
        w.delivered(removal(2, None));
        let waiting =
            tokio::time::timeout(Duration::from_millis(50), w.ready_for_next(&token)).await;
        assert!(waiting.is_err(), "two unwritten: it waits");
        let (flush, _) = a.take();
        a.done.send_replace(flush);
        assert!(w.ready_for_next(&token).await);
        assert!(w.unconfirmed.is_empty());
        w.delivered(removal(3, None));
        w.delivered(removal(4, None));
        token.cancel();
        assert!(!w.ready_for_next(&token).await, "a stop ends the wait");
    }
}

//! The queue's order, spills, pages and bounds.

use std::sync::Arc;

use super::*;
use crate::{delivery::budget::Budget, event::Payload};

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
        slot: 0,
        source: 0,
        chain: None,
        original: None,
        trace: None,
    }
}

/// A stream with `length` entries waiting, up to `until`, and no cursor.
fn waiting(until: u64, length: usize) -> Position {
    Position {
        last_ts: until,
        length,
        delivered: 0,
    }
}

fn order(q: &HookQueue) -> Vec<u64> {
    std::iter::from_fn(|| q.pop()).map(|e| e.ts).collect()
}

#[test]
fn fresh_entries_wait_behind_the_stored_ones() {
    let q = HookQueue::stored(Arc::default(), waiting(3, 3));
    assert!(q.push(entry(10), 10, 100).dropped.is_empty());
    assert!(q.pop().is_none(), "nothing before the first page");
    assert_eq!(q.span().map(|s| (s.until, s.count)), Some((10, 4)));
    assert!(q.add_page(vec![entry(1), entry(2)], 2, Some(2), None));
    q.push(entry(11), 10, 100);
    assert_eq!(order(&q), [1, 2], "then it waits for the next page");
    // A read up to 10 that came back short: 11 joined the span meanwhile, so it goes on.
    assert!(q.add_page(vec![entry(3), entry(10)], 2, Some(10), Some(10)));
    assert!(!q.add_page(vec![entry(11)], 1, Some(11), Some(11)));
    assert_eq!(order(&q), [3, 10, 11]);
    q.push(entry(12), 10, 100);
    assert_eq!(order(&q), [12], "no span: held in memory again");
}

#[test]
fn announced_and_pushed_entries_are_taken_once_in_order() {
    let q = HookQueue::stored(Arc::default(), waiting(5, 0));
    assert!(q.span().is_none(), "an empty stream: nothing to read");
    assert!(q.push(entry(5), 10, 100).dropped.is_empty());
    assert_eq!(q.total(), 0, "at or below the stream's end: had already");
    assert!(q.extend(8, 3), "written elsewhere: a span to read begins");
    assert!(!q.extend(7, 1), "an older announcement changes nothing");
    assert_eq!(q.span().map(|s| (s.after, s.until)), Some((Some(5), 8)));
    q.push(entry(8), 10, 100);
    q.push(entry(9), 10, 100);
    assert_eq!(q.span().map(|s| s.until), Some(9), "fresh ones wait behind");
    assert!(!q.add_page(
        vec![entry(6), entry(7), entry(8), entry(9)],
        4,
        Some(9),
        Some(9)
    ));
    assert_eq!(order(&q), [6, 7, 8, 9]);
    assert!(!q.extend(9, 1), "announced after it was pushed: once only");
    q.push(entry(10), 10, 100);
    assert_eq!(order(&q), [10]);
}

#[test]
fn a_burst_beyond_the_window_spills_to_redis_in_order() {
    let q = HookQueue::default();
    for ts in 1..=WINDOW as u64 {
        assert!(!q.push(entry(ts), 10, 100_000).spilled);
    }
    assert!(q.push(entry(1000), 10, 100_000).spilled, "a span begins");
    assert!(!q.push(entry(1001), 10, 100_000).spilled, "and grows");
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
    assert!(q.push(entry(10), 10, 2).dropped.is_empty());
    assert!(q.push(entry(11), 10, 2).dropped.is_empty());
    let dropped = q.push(entry(12), 10, 2).dropped;
    assert_eq!(dropped.iter().map(|e| e.ts).collect::<Vec<_>>(), [10]);
    assert_eq!(order(&q), [11, 12]);
}

#[test]
fn over_the_budget_the_queue_beyond_its_share_drops_its_oldest() {
    let budget = Arc::new(Budget::new(1000));
    let (a, b) = (
        HookQueue::new(budget.clone()),
        HookQueue::new(budget.clone()),
    );
    for ts in 1..=10 {
        assert!(a.push(entry(ts), 100, 1000).dropped.is_empty());
    }
    let pushed = b.push(entry(1), 100, 1000);
    assert!(pushed.dropped.is_empty(), "within its share (500)");
    assert_eq!(budget.over(), 100);
    let pushed = a.push(entry(11), 100, 1000);
    let dropped: Vec<u64> = pushed.dropped.iter().map(|e| e.ts).collect();
    assert_eq!(
        dropped,
        [1, 2],
        "what the queues were over, from its oldest"
    );
    assert!(pushed.by_budget);
    assert_eq!((budget.used(), budget.over()), (1000, 0));
    assert_eq!(order(&a), (3..=11).collect::<Vec<_>>());
    assert_eq!(budget.used(), 100, "delivered callbacks leave the budget");
    drop(b);
    assert_eq!(budget.used(), 0, "and so do removed queues");
}

#[test]
fn a_page_read_over_the_budget_is_trimmed_from_the_oldest() {
    let budget = Arc::new(Budget::new(10 * UNKNOWN_COST));
    let q = HookQueue::stored(budget.clone(), waiting(30, 30));
    assert_eq!(budget.over(), 20 * UNKNOWN_COST);
    let room = q.make_room(16, 1000);
    assert_eq!(
        (room.from_memory.len(), room.from_page, room.by_budget),
        (0, 16, true)
    );
    let room = q.make_room(16, 5);
    assert_eq!(
        (room.from_page, room.by_budget),
        (16, false),
        "max_queue first"
    );
    // 16 read and dropped, 2 read and kept: each takes the span's average along.
    assert!(q.add_page(vec![entry(17), entry(18)], 18, Some(18), None));
    assert_eq!(
        budget.used(),
        14 * UNKNOWN_COST,
        "moving to memory keeps the total"
    );
    // Over again: the two in memory (older than any page) go first.
    let room = q.make_room(16, 1000);
    let from_memory: Vec<u64> = room.from_memory.iter().map(|e| e.ts).collect();
    assert_eq!((from_memory, room.from_page), (vec![17, 18], 2));
    assert_eq!(budget.over(), 2 * UNKNOWN_COST);
}

#[test]
fn large_payloads_spill_by_bytes_and_are_counted_out_again() {
    let q = HookQueue::default();
    let big = WINDOW_BYTES / 4;
    for ts in 1..=4 {
        assert!(!q.push(sized(ts, big), 10, 100).spilled);
    }
    assert_eq!(q.bytes_in_memory(), WINDOW_BYTES);
    assert!(
        q.push(sized(5, 10), 10, 100).spilled,
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
    q.push(sized(6, 100), 10, 1);
    assert_eq!(q.push(sized(7, 30), 10, 1).dropped.len(), 1);
    assert_eq!(q.bytes_in_memory(), 30);
}

/// One change a queue can go through.
#[derive(Debug, Clone)]
enum Change {
    Push {
        queue: usize,
        cost: u64,
        max: usize,
    },
    Pop {
        queue: usize,
    },
    Extend {
        queue: usize,
        count: usize,
    },
    MakeRoom {
        queue: usize,
        read: usize,
        max: usize,
    },
    AddPage {
        queue: usize,
        n: usize,
    },
}

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    prop_oneof![
        (0..2usize, 1..400u64, 1..40usize).prop_map(|(queue, cost, max)| Change::Push {
            queue,
            cost,
            max
        }),
        (0..2usize).prop_map(|queue| Change::Pop { queue }),
        (0..2usize, 0..50usize).prop_map(|(queue, count)| Change::Extend { queue, count }),
        (0..2usize, 0..30usize, 1..40usize).prop_map(|(queue, read, max)| Change::MakeRoom {
            queue,
            read,
            max
        }),
        (0..2usize, 0..30usize).prop_map(|(queue, n)| Change::AddPage { queue, n }),
    ]
}

proptest::proptest! {
    /// Whatever queues go through, the budget of all queues holds exactly what they take, and
    /// nothing once they are gone: no change can skip telling it (changes go through `Edit`).
    #[test]
    fn the_budget_holds_what_the_queues_take_after_every_change(
        changes in proptest::collection::vec(change(), 0..80),
        stored in 0..40usize,
    ) {
        let budget = Arc::new(Budget::new(3000));
        let queues = [
            HookQueue::stored(budget.clone(), waiting(1000, stored)),
            HookQueue::new(budget.clone()),
        ];
        let mut ts = [1000u64, 0];
        for c in changes {
            match c {
                Change::Push { queue, cost, max } => {
                    ts[queue] += 1;
                    queues[queue].push(entry(ts[queue]), cost, max);
                }
                Change::Pop { queue } => drop(queues[queue].pop()),
                Change::Extend { queue, count } => {
                    ts[queue] += count as u64 + 1;
                    queues[queue].extend(ts[queue], count);
                }
                Change::MakeRoom { queue, read, max } => drop(queues[queue].make_room(read, max)),
                Change::AddPage { queue, n } => {
                    if let Some(span) = queues[queue].span() {
                        let n = n.min(span.count);
                        let first = span.after.unwrap_or(0) + 1;
                        let page: Vec<Entry> = (first..first + n as u64).map(entry).collect();
                        let last = page.last().map(|e| e.ts);
                        let complete = (n == span.count).then_some(span.until);
                        queues[queue].add_page(page, n, last, complete);
                    }
                }
            }
            let taken: u64 = queues.iter().map(HookQueue::taken).sum();
            proptest::prop_assert_eq!(budget.used(), taken);
        }
        drop(queues);
        proptest::prop_assert_eq!(budget.used(), 0);
    }
}

#[test]
fn an_emptied_window_gives_a_burst_s_room_back() {
    let q = HookQueue::default();
    for ts in 1..=WINDOW as u64 {
        q.push(entry(ts), 10, 100_000);
    }
    assert!(q.room() >= WINDOW);
    let half = WINDOW as u64 / 2;
    assert_eq!(order_upto(&q, half), (1..=half).collect::<Vec<_>>());
    assert!(q.room() >= WINDOW, "kept while entries wait");
    assert_eq!(order(&q), (half + 1..=WINDOW as u64).collect::<Vec<_>>());
    assert!(q.room() <= KEPT_ROOM, "given back once empty: {}", q.room());
    for ts in 1..=4 {
        q.push(entry(WINDOW as u64 + ts), 10, 100_000);
    }
    assert_eq!(order(&q).len(), 4, "and grown again when needed");
}

fn order_upto(q: &HookQueue, n: u64) -> Vec<u64> {
    (0..n).filter_map(|_| q.pop()).map(|e| e.ts).collect()
}

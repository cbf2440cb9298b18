//! The byte budget of all queues together (`delivery.queue_budget_mb`). Each hook's queue
//! counts what its callbacks take in Redis (an estimate, [`cost`]) in its owner's [`Account`];
//! while the queues together take more than the budget, a queue holding more than its share
//! drops its oldest callbacks as new ones come or as it reads the next page. The share is fair
//! by owner first, then by hook: the budget divided among the owners (each tenant, and the
//! operator) whose queues hold anything, then among that owner's queues that do. So one
//! receiver down for long fills only its share, and a tenant with 500 busy hooks takes no more
//! than a tenant with one; the others lose nothing.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::{event::Payload, store_conn::StoreConn};

/// What a stored callback takes in Redis besides its payload (the stream entry's id, fields,
/// event id and the stream's own bookkeeping), measured on Redis 7 (BENCHMARKS.md).
pub(crate) const ENTRY_OVERHEAD: u64 = 120;
/// An estimate for a callback whose size is not known (read back from Redis after a restart,
/// or written by another instance): a user-joined event's, measured.
pub(crate) const UNKNOWN_COST: u64 = 420;

/// The estimated Redis bytes of one stored callback: its entry, and its payload, or its part of
/// a shared payload record (`sharers` callbacks refer to it).
pub(crate) fn cost(payload: &Payload, sharers: Option<usize>) -> u64 {
    let len = payload.text().len() as u64;
    match sharers {
        None => ENTRY_OVERHEAD + len,
        Some(n) => ENTRY_OVERHEAD + len / n.max(1) as u64,
    }
}

/// The budget when `delivery.queue_budget_mb` is unset and the store has no `maxmemory`.
pub(crate) const DEFAULT_MB: u64 = 1024;

/// The budget in bytes: `configured` megabytes, else half of the store's `maxmemory` when
/// that is set, else [`DEFAULT_MB`]; with where it came from, for the log.
pub(crate) async fn resolve_budget(
    configured: Option<u64>,
    conn: &mut StoreConn,
) -> (u64, &'static str) {
    if let Some(mb) = configured {
        return (mb.saturating_mul(1 << 20), "delivery.queue_budget_mb");
    }
    let info = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        redis::cmd("INFO").arg("memory").query_async::<String>(conn),
    )
    .await;
    match info
        .ok()
        .and_then(Result::ok)
        .as_deref()
        .and_then(maxmemory)
    {
        Some(max) if max > 0 => (max / 2, "half of the store's maxmemory"),
        _ => (DEFAULT_MB << 20, "the default (the store has no maxmemory)"),
    }
}

/// `maxmemory` from the text of `INFO memory`.
fn maxmemory(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix("maxmemory:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The budget and what the queues take of it now.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: u64,
    used: AtomicU64,
    /// Owners (each tenant, and the operator) with a queue holding anything.
    owners_holding: AtomicU64,
    /// Each owner's count of queues holding anything, by owner (a tenant's id; `None`: the
    /// operator): looked up once per queue ([`Account::of`]), never on the way of a callback.
    owners: Mutex<HashMap<Option<Arc<str>>, Arc<AtomicU64>>>,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(u64::MAX)
    }
}

/// One queue's owner within the budget: what it takes is counted for that owner.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    budget: Arc<Budget>,
    /// Its owner's queues holding anything (shared by the owner's accounts).
    holding: Arc<AtomicU64>,
}

impl Default for Account {
    /// An operator's queue without a budget.
    fn default() -> Self {
        Arc::new(Budget::default()).into()
    }
}

impl From<Arc<Budget>> for Account {
    /// An operator's queue within `budget`.
    fn from(budget: Arc<Budget>) -> Self {
        Self::of(&budget, None)
    }
}

/// Adds one to `n`; whether it was 0.
fn up(n: &AtomicU64) -> bool {
    n.fetch_add(1, Ordering::Relaxed) == 0
}

/// Takes one from `n`, never below 0; whether it reached 0.
fn down(n: &AtomicU64) -> bool {
    n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(1))
    }) == Ok(1)
}

impl Account {
    /// A queue of `owner`'s (a tenant's id; `None`: the operator's) within `budget`.
    pub(crate) fn of(budget: &Arc<Budget>, owner: Option<&str>) -> Self {
        let mut owners = budget.owners.lock().unwrap_or_else(|e| e.into_inner());
        let holding = owners.entry(owner.map(Arc::from)).or_default().clone();
        drop(owners);
        Self {
            budget: budget.clone(),
            holding,
        }
    }

    /// The queue went from taking `before` bytes to `after`.
    pub(crate) fn moved(&self, before: u64, after: u64) {
        let b = &self.budget;
        b.moved(before, after);
        match (before, after) {
            (0, a) if a > 0 && up(&self.holding) => {
                up(&b.owners_holding);
            }
            (b_, 0) if b_ > 0 && down(&self.holding) => {
                down(&b.owners_holding);
            }
            _ => {}
        }
    }

    /// This queue's share: the budget divided among the owners whose queues hold anything,
    /// then among this owner's queues that do.
    fn share(&self) -> u64 {
        let owners = self.budget.owners_holding.load(Ordering::Relaxed).max(1);
        let own = self.holding.load(Ordering::Relaxed).max(1);
        self.budget.limit / owners / own
    }

    /// How many bytes the queue, taking `taken`, should give up now: nothing within the
    /// budget or within its share; else what it holds beyond its share, at most what the
    /// queues are over.
    pub(crate) fn excess(&self, taken: u64) -> u64 {
        let over = self.budget.over();
        if over == 0 {
            return 0;
        }
        taken.saturating_sub(self.share()).min(over)
    }
}

impl Budget {
    pub(crate) fn new(limit_bytes: u64) -> Self {
        Self {
            limit: limit_bytes,
            used: AtomicU64::new(0),
            owners_holding: AtomicU64::new(0),
            owners: Mutex::default(),
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the queues take, as estimated.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// A queue went from taking `before` bytes to `after`.
    fn moved(&self, before: u64, after: u64) {
        if after > before {
            self.used.fetch_add(after - before, Ordering::Relaxed);
        } else if before > after {
            // Never below 0, even if updates of two queues interleave.
            let _ = self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    Some(u.saturating_sub(before - after))
                });
        }
    }

    /// How many bytes over the budget the queues are (0 within it).
    pub(crate) fn over(&self) -> u64 {
        self.used().saturating_sub(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_over_its_share_gives_up_what_the_queues_are_over() {
        let b = Arc::new(Budget::new(1000));
        let (q1, q2) = (Account::from(b.clone()), Account::from(b.clone()));
        q1.moved(0, 300);
        q2.moved(0, 200);
        assert_eq!((b.used(), b.over(), q1.share()), (500, 0, 500));
        assert_eq!(q1.excess(300), 0, "within the budget");
        q1.moved(300, 900);
        assert_eq!((b.over(), q1.share()), (100, 500));
        assert_eq!(q1.excess(900), 100, "what the queues are over");
        assert_eq!(q2.excess(200), 0, "within its share");
        q2.moved(200, 0);
        assert_eq!(
            (b.over(), q1.share()),
            (0, 1000),
            "one queue left: all of it"
        );
        q1.moved(900, 1500);
        assert_eq!(q1.excess(1500), 500);
        q1.moved(1500, 0);
        assert_eq!((b.used(), q1.share()), (0, 1000));
    }

    #[test]
    fn the_share_is_fair_by_owner_first_then_by_hook() {
        let b = Arc::new(Budget::new(1200));
        // A tenant with 500 busy hooks, one with a single hook, and the operator's one hook.
        let many: Vec<Account> = (0..500).map(|_| Account::of(&b, Some("many"))).collect();
        for q in &many {
            q.moved(0, 2);
        }
        let one = Account::of(&b, Some("one"));
        one.moved(0, 700);
        let op = Account::of(&b, None);
        op.moved(0, 100);
        // Each owner a third (400): the lone hook's share is 400, each of the 500 hooks' 0.
        assert_eq!(one.share(), 400);
        assert_eq!(op.share(), 400);
        assert_eq!(many[0].share(), 0);
        assert_eq!(b.over(), 1000 + 700 + 100 - 1200);
        assert_eq!(one.excess(700), 300, "beyond its owner's share");
        assert_eq!(op.excess(100), 0, "within its owner's share");
        assert_eq!(many[0].excess(2), 2);
        // The busy tenant's hooks empty: two owners left, 600 each.
        for q in &many {
            q.moved(2, 0);
        }
        assert_eq!(one.share(), 600);
        assert_eq!(one.excess(700), 0, "within the budget again");
    }

    #[test]
    fn maxmemory_is_read_from_info() {
        let info =
            "# Memory\r\nused_memory:1000\r\nmaxmemory:2147483648\r\nmaxmemory_human:2.00G\r\n";
        assert_eq!(maxmemory(info), Some(2 << 30));
        assert_eq!(maxmemory("used_memory:1\r\n"), None);
    }

    #[test]
    fn a_shared_payload_counts_its_part() {
        let p = Payload::new("x".repeat(1000));
        assert_eq!(cost(&p, None), ENTRY_OVERHEAD + 1000);
        assert_eq!(cost(&p, Some(4)), ENTRY_OVERHEAD + 250);
        assert_eq!(cost(&p, Some(0)), ENTRY_OVERHEAD + 1000);
    }
}

//! The byte budget of all queues together (`delivery.queue_budget_mb`). Each hook's queue
//! counts what its callbacks take in Redis (an estimate, [`cost`]); while the queues together
//! take more than the budget, a queue holding more than its share (the budget divided among
//! the queues that hold anything) drops its oldest callbacks as new ones come or as it reads
//! the next page. So one receiver down for long fills only its share; the others lose nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{event::Payload, store_conn::StoreConn};

/// What a stored callback takes in Redis besides its payload (the stream entry's id, fields,
/// event id and the stream's own bookkeeping), measured on Redis 7 (BENCHMARKS.md).
pub const ENTRY_OVERHEAD: u64 = 120;
/// An estimate for a callback whose size is not known (read back from Redis after a restart,
/// or written by another instance): a user-joined event's, measured.
pub const UNKNOWN_COST: u64 = 420;

/// The estimated Redis bytes of one stored callback: its entry, and its payload, or its part of
/// a shared payload record (`sharers` callbacks refer to it).
pub fn cost(payload: &Payload, sharers: Option<usize>) -> u64 {
    let len = payload.text().len() as u64;
    match sharers {
        None => ENTRY_OVERHEAD + len,
        Some(n) => ENTRY_OVERHEAD + len / n.max(1) as u64,
    }
}

/// The budget when `delivery.queue_budget_mb` is unset and the store has no `maxmemory`.
pub const DEFAULT_MB: u64 = 1024;

/// The budget in bytes: `configured` megabytes, else half of the store's `maxmemory` when
/// that is set, else [`DEFAULT_MB`]; with where it came from, for the log.
pub async fn resolve(configured: Option<u64>, conn: &mut StoreConn) -> (u64, &'static str) {
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
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    /// Queues holding anything.
    queues: AtomicU64,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(u64::MAX)
    }
}

impl Budget {
    pub fn new(limit_bytes: u64) -> Self {
        Self {
            limit: limit_bytes,
            used: AtomicU64::new(0),
            queues: AtomicU64::new(0),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the queues take, as estimated.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// A queue went from taking `before` bytes to `after`.
    pub fn moved(&self, before: u64, after: u64) {
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
        match (before, after) {
            (0, a) if a > 0 => {
                self.queues.fetch_add(1, Ordering::Relaxed);
            }
            (b, 0) if b > 0 => {
                let _ = self
                    .queues
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                        Some(q.saturating_sub(1))
                    });
            }
            _ => {}
        }
    }

    /// How many bytes over the budget the queues are (0 within it).
    pub fn over(&self) -> u64 {
        self.used().saturating_sub(self.limit)
    }

    /// One queue's share: the budget divided among the queues that hold anything.
    pub fn share(&self) -> u64 {
        self.limit / self.queues.load(Ordering::Relaxed).max(1)
    }

    /// How many bytes a queue taking `taken` should give up now: nothing within the budget or
    /// within its share; else what it holds beyond its share, at most what the queues are over.
    pub fn excess(&self, taken: u64) -> u64 {
        let over = self.over();
        if over == 0 {
            return 0;
        }
        taken.saturating_sub(self.share()).min(over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_over_its_share_gives_up_what_the_queues_are_over() {
        let b = Budget::new(1000);
        b.moved(0, 300);
        b.moved(0, 200);
        assert_eq!((b.used(), b.over(), b.share()), (500, 0, 500));
        assert_eq!(b.excess(300), 0, "within the budget");
        b.moved(300, 900);
        assert_eq!((b.over(), b.share()), (100, 500));
        assert_eq!(b.excess(900), 100, "what the queues are over");
        assert_eq!(b.excess(200), 0, "within its share");
        b.moved(200, 0);
        assert_eq!(
            (b.over(), b.share()),
            (0, 1000),
            "one queue left: all of it"
        );
        b.moved(900, 1500);
        assert_eq!(b.excess(1500), 500);
        b.moved(1500, 0);
        assert_eq!((b.used(), b.share()), (0, 1000));
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

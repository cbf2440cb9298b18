//! Delivery: per-hook FIFO queues with one callback in flight ([`queue`]), kept in Redis
//! ([`journal`]), the retry schedule ([`retry`]), signing ([`sign`], pure) and the HTTP client
//! ([`client`]).

pub mod client;
pub mod journal;
pub mod queue;
pub mod retry;
pub mod sign;
pub mod ssrf;

use std::sync::atomic::{AtomicU64, Ordering};

/// Callback timestamps: milliseconds, strictly increasing across every callback of the relay.
#[derive(Debug, Default)]
pub struct Timestamps {
    last: AtomicU64,
}

impl Timestamps {
    /// The next timestamp: now, or one more than the previous one if the clock has not moved on.
    pub fn next(&self) -> u64 {
        let now = now_ms();
        let prev = self
            .last
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                Some(now.max(last + 1))
            })
            .unwrap_or_else(|v| v);
        now.max(prev + 1)
    }

    /// Makes sure later timestamps exceed `ts` (one read back from Redis).
    pub fn observe(&self, ts: u64) {
        self.last.fetch_max(ts, Ordering::AcqRel);
    }
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_strictly_increase_across_threads() {
        let ts = std::sync::Arc::new(Timestamps::default());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let ts = ts.clone();
                std::thread::spawn(move || (0..10_000).map(|_| ts.next()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no timestamp is handed out twice");
    }
}

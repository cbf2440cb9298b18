//! The edge's outbox, in its server's own Redis: every bus message read is appended to it
//! first (a stream, in bus order) and deleted once it is in the pool's store, so that an
//! unreachable store, or a restart of the edge, loses nothing. Bounded by `edge.buffer_mib`:
//! beyond it the oldest messages go, counted, and said once in the log.

use redis::aio::ConnectionManager;

use super::metrics::EdgeMetrics;
use crate::{base::redis_keys::EDGE_OUTBOX, bus::BusMessage};

/// What an entry costs beyond its channel and payload, about (its id and field names).
const ENTRY_OVERHEAD: usize = 48;

/// Entries read or deleted at a time.
const PAGE: usize = 512;

/// One message in the outbox.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) id: String,
    pub(super) channel: String,
    pub(super) payload: String,
}

impl Entry {
    fn size(&self) -> i64 {
        size(&self.channel, &self.payload)
    }
}

fn size(channel: &str, payload: &str) -> i64 {
    i64::try_from(channel.len() + payload.len() + ENTRY_OVERHEAD).unwrap_or(i64::MAX)
}

/// The outbox, its size kept in the edge's gauges.
pub(super) struct Outbox {
    pub(super) conn: ConnectionManager,
    /// `edge.buffer_mib`, in bytes.
    pub(super) limit: i64,
    pub(super) metrics: EdgeMetrics,
    /// Whether the log has said the outbox is full (once, until it empties again).
    pub(super) full_said: std::sync::atomic::AtomicBool,
}

impl Outbox {
    /// Counts what the outbox holds (after a restart, what was not forwarded before).
    ///
    /// # Errors
    /// When the server's Redis fails.
    pub(super) async fn measure(&self) -> redis::RedisResult<()> {
        let (mut count, mut bytes, mut after) = (0i64, 0i64, None);
        loop {
            let page = self.read_after(after.as_deref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            count += i64::try_from(page.len()).unwrap_or(i64::MAX);
            bytes += page.iter().map(Entry::size).sum::<i64>();
        }
        self.metrics.buffered.set(count);
        self.metrics.buffered_bytes.set(bytes);
        Ok(())
    }

    /// Appends `batch`, in order; then lets the oldest go while the outbox holds more than
    /// its limit.
    ///
    /// # Errors
    /// When the server's Redis fails (nothing of the batch may be in then).
    pub(super) async fn append(&self, batch: &[BusMessage]) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        let mut bytes = 0;
        for m in batch {
            pipe.cmd("XADD")
                .arg(EDGE_OUTBOX)
                .arg("*")
                .arg("c")
                .arg(&*m.channel)
                .arg("p")
                .arg(&*m.payload)
                .ignore();
            bytes += size(&m.channel, &m.payload);
        }
        let () = pipe.query_async(&mut self.conn.clone()).await?;
        self.metrics
            .buffered
            .inc_by(i64::try_from(batch.len()).unwrap_or(i64::MAX));
        self.metrics.buffered_bytes.inc_by(bytes);
        if self.metrics.buffered_bytes.get() > self.limit {
            self.trim().await?;
        }
        Ok(())
    }

    /// Lets the oldest messages go until the outbox holds its limit.
    async fn trim(&self) -> redis::RedisResult<()> {
        while self.metrics.buffered_bytes.get() > self.limit {
            let oldest = self.read_after(None, PAGE).await?;
            if oldest.is_empty() {
                return Ok(());
            }
            let mut over = self.metrics.buffered_bytes.get() - self.limit;
            let cut = oldest
                .iter()
                .take_while(|e| {
                    let go = over > 0;
                    over -= e.size();
                    go
                })
                .count();
            let gone = self.delete(&oldest[..cut]).await?;
            self.metrics.dropped.inc_by(gone);
            if !self
                .full_said
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    limit_mib = self.limit / (1024 * 1024),
                    "the edge's outbox is full (edge.buffer_mib): the oldest bus messages go, counted in hookrelay_edge_messages_dropped_total, until the pool's store takes them again"
                );
            }
        }
        Ok(())
    }

    /// Up to `n` entries after `after` (from the first without), in order.
    ///
    /// # Errors
    /// When the server's Redis fails.
    pub(super) async fn read_after(
        &self,
        after: Option<&str>,
        n: usize,
    ) -> redis::RedisResult<Vec<Entry>> {
        let start = after.map_or_else(|| "-".to_string(), next_id);
        self.range(&start, "+", n).await
    }

    /// Up to `n` entries from `start` to `end` (both included), in order.
    async fn range(&self, start: &str, end: &str, n: usize) -> redis::RedisResult<Vec<Entry>> {
        let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(EDGE_OUTBOX)
            .arg(start)
            .arg(end)
            .arg("COUNT")
            .arg(n)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(raw.into_iter().map(entry).collect())
    }

    /// Deletes `entries` (those still there); how many it deleted. Each is counted out of the
    /// gauges once, whoever deletes it.
    ///
    /// # Errors
    /// When the server's Redis fails.
    pub(super) async fn delete(&self, entries: &[Entry]) -> redis::RedisResult<u64> {
        if entries.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for e in entries {
            pipe.cmd("XDEL").arg(EDGE_OUTBOX).arg(&e.id);
        }
        let deleted: Vec<i64> = pipe.query_async(&mut self.conn.clone()).await?;
        let (mut count, mut bytes) = (0, 0);
        for (e, d) in entries.iter().zip(deleted) {
            if d > 0 {
                count += 1;
                bytes += e.size();
            }
        }
        self.metrics.buffered.dec_by(count);
        self.metrics.buffered_bytes.dec_by(bytes);
        if self.metrics.buffered_bytes.get() < self.limit / 2 {
            self.full_said
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Deletes every entry up to `id` (they are in the pool's store already).
    ///
    /// # Errors
    /// When the server's Redis fails.
    pub(super) async fn delete_through(&self, id: &str) -> redis::RedisResult<()> {
        loop {
            let page = self.range("-", id, PAGE).await?;
            if page.is_empty() {
                return Ok(());
            }
            self.delete(&page).await?;
        }
    }
}

/// An entry from XRANGE's reply (fields `c` and `p`; others are ignored).
fn entry((id, fields): (String, Vec<String>)) -> Entry {
    let (mut channel, mut payload) = (String::new(), String::new());
    for pair in fields.chunks(2) {
        if let [k, v] = pair {
            match k.as_str() {
                "c" => channel.clone_from(v),
                "p" => payload.clone_from(v),
                _ => {}
            }
        }
    }
    Entry {
        id,
        channel,
        payload,
    }
}

/// The smallest stream id after `id` (`ms-seq`): XRANGE's start is inclusive.
pub(super) fn next_id(id: &str) -> String {
    match id
        .split_once('-')
        .map(|(ms, seq)| (ms.parse::<u64>(), seq.parse::<u64>()))
    {
        Some((Ok(ms), Ok(u64::MAX))) => format!("{}-0", ms.saturating_add(1)),
        Some((Ok(ms), Ok(seq))) => format!("{ms}-{}", seq + 1),
        _ => format!("({id}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_next_id_is_the_smallest_after() {
        assert_eq!(super::next_id("1700000000000-0"), "1700000000000-1");
        assert_eq!(super::next_id("5-18446744073709551615"), "6-0");
        assert_eq!(super::next_id("odd"), "(odd");
    }
}

//! The edge's own series: messages read off the server's bus, forwarded to the pool's store,
//! kept in the outbox meanwhile, dropped when the outbox was full, and whether the pool's
//! store is reachable.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::Counter, gauge::Gauge},
};

/// The edge's series (cheap to clone: each shares its value).
#[derive(Debug, Clone, Default)]
pub(crate) struct EdgeMetrics {
    pub(super) read: Counter,
    pub(super) forwarded: Counter,
    pub(super) dropped: Counter,
    /// Messages in the outbox now.
    pub(super) buffered: Gauge,
    /// Their size (channel and payload), about.
    pub(super) buffered_bytes: Gauge,
    /// 1 while the last write to the pool's store succeeded.
    pub(super) store_up: Gauge,
}

impl Collector for EdgeMetrics {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let counters = [
            (
                "hookrelay_edge_messages_read",
                "Bus messages the edge read off its server's bus",
                &self.read,
            ),
            (
                "hookrelay_edge_messages_forwarded",
                "Bus messages the edge wrote to the pool's store",
                &self.forwarded,
            ),
            (
                "hookrelay_edge_messages_dropped",
                "Bus messages the edge's outbox let go, oldest first, when it held edge.buffer_mib",
                &self.dropped,
            ),
        ];
        for (name, help, c) in counters {
            c.encode(e.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        let gauges = [
            (
                "hookrelay_edge_buffered_messages",
                "Bus messages in the edge's outbox, not yet in the pool's store",
                &self.buffered,
            ),
            (
                "hookrelay_edge_buffered_bytes",
                "The size of the messages in the edge's outbox (their channels and payloads)",
                &self.buffered_bytes,
            ),
            (
                "hookrelay_edge_store_up",
                "1 while the pool's store takes the edge's writes",
                &self.store_up,
            ),
        ];
        for (name, help, g) in gauges {
            g.encode(e.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        Ok(())
    }
}

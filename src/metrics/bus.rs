//! The bus series, one set per source: every one carries a `source` label, whose values are
//! the configured source names (at most [`crate::config::MAX_SOURCES`]).

use std::sync::Arc;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::{
    SourceLabel,
    live::{BusClock, SourceClock},
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SkipLabels {
    source: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EventSourceLabels {
    source: String,
    event: String,
}

/// The families; [`BusMetrics::source`] gives one source's series.
#[derive(Default)]
pub struct BusMetrics {
    messages: Family<SourceLabel, Counter>,
    skipped: Family<SkipLabels, Counter>,
    reconnects: Family<SourceLabel, Counter>,
    pub connected: Family<SourceLabel, Gauge>,
    events_mapped: Family<EventSourceLabels, Counter>,
    clock: Arc<BusClock>,
}

/// One source's series, held by its subscriber.
#[derive(Clone)]
pub struct SourceMetrics {
    pub(crate) messages: Counter,
    pub(crate) reconnects: Counter,
    /// 1 while its subscription is up.
    pub(crate) connected: Gauge,
    pub(crate) clock: SourceClock,
}

impl BusMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_bus_messages",
            "Messages received from the bus, by source",
            self.messages.clone(),
        );
        r.register(
            "hookrelay_bus_skipped",
            "Bus messages skipped, by source and reason",
            self.skipped.clone(),
        );
        r.register(
            "hookrelay_bus_reconnects",
            "Times a source's bus subscription was made again after a loss",
            self.reconnects.clone(),
        );
        r.register(
            "hookrelay_events_mapped",
            "Processed events produced, by source and event id",
            self.events_mapped.clone(),
        );
        r.register(
            "hookrelay_redis_connected",
            "1 while the bus subscription to the source's Redis is up",
            self.connected.clone(),
        );
        r.register_collector(Box::new(self.clock.clone()));
    }

    /// Source `name`'s series, shown (at zero) from now on.
    pub fn source(&self, name: &str) -> SourceMetrics {
        let label = SourceLabel {
            source: name.to_string(),
        };
        SourceMetrics {
            messages: self.messages.get_or_create(&label).clone(),
            reconnects: self.reconnects.get_or_create(&label).clone(),
            connected: self.connected.get_or_create(&label).clone(),
            clock: self.clock.source(name),
        }
    }

    /// Counts a bus message of `source` skipped for `reason`.
    pub fn skip(&self, source: &str, reason: &str) {
        self.skipped
            .get_or_create(&SkipLabels {
                source: source.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts an event of `source`.
    pub fn mapped(&self, source: &str, event: &str) {
        self.events_mapped
            .get_or_create(&EventSourceLabels {
                source: source.to_string(),
                event: event.to_string(),
            })
            .inc();
    }
}

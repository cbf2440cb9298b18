//! The fleet series (`[fleet]`): who holds the lease, how often it changed hands and what the
//! taker queued first.

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::SourceLabel;

#[derive(Default)]
pub struct FleetMetrics {
    pub holder: Gauge,
    pub takeovers: Counter,
    pub resumed: Counter,
    pub cursor_missing: Family<SourceLabel, Counter>,
}

impl FleetMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_fleet_lease_held",
            "1 while this instance holds the fleet lease (queues and delivers)",
            self.holder.clone(),
        );
        r.register(
            "hookrelay_fleet_takeovers",
            "Times this instance took the fleet lease",
            self.takeovers.clone(),
        );
        r.register(
            "hookrelay_fleet_resumed_messages",
            "Bus messages kept while not holding the lease and queued on taking it",
            self.resumed.clone(),
        );
        r.register(
            "hookrelay_fleet_cursor_not_found",
            "Takeovers that did not find the last holder's place in a source among the messages \
             kept (all were queued, some perhaps again)",
            self.cursor_missing.clone(),
        );
    }

    /// Counts a cursor of `source` not found.
    pub fn cursor_not_found(&self, source: &str) {
        self.cursor_missing
            .get_or_create(&SourceLabel {
                source: source.to_string(),
            })
            .inc();
    }
}

//! The fleet series (`[fleet]`): who holds the lease, how often it changed hands and what the
//! taker queued first; with delivery spread, how many hooks this instance delivers and how
//! their leases came and went.

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
    /// Hooks whose delivery lease this instance holds.
    pub hooks_held: Gauge,
    /// Live instances, as this one last counted them.
    pub instances: Gauge,
    pub hook_leases_taken: Counter,
    pub hook_leases_released: Counter,
    pub hook_leases_lost: Counter,
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
        r.register(
            "hookrelay_fleet_hooks_held",
            "Hooks whose delivery lease this instance holds (it sends their callbacks)",
            self.hooks_held.clone(),
        );
        r.register(
            "hookrelay_fleet_instances",
            "Live instances of the fleet, as this one last counted them",
            self.instances.clone(),
        );
        r.register(
            "hookrelay_fleet_hook_leases_taken",
            "Delivery leases of hooks this instance took",
            self.hook_leases_taken.clone(),
        );
        r.register(
            "hookrelay_fleet_hook_leases_released",
            "Delivery leases this instance gave up (to balance, for a removed hook, at a stop)",
            self.hook_leases_released.clone(),
        );
        r.register(
            "hookrelay_fleet_hook_leases_lost",
            "Delivery leases this instance found another's or could not renew in time",
            self.hook_leases_lost.clone(),
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

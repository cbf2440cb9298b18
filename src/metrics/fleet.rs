//! The fleet series (`[fleet]`): who holds the lease, how often it changed hands and what the
//! taker queued first; with delivery spread, how many hooks this instance delivers and how
//! their leases came and went; how far back this instance's kept messages reach.

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::SourceLabel;

#[derive(Default)]
pub(crate) struct FleetMetrics {
    pub(crate) holder: Gauge,
    pub(crate) takeovers: Counter,
    pub(crate) resumed: Counter,
    /// Callbacks of resumed messages not queued again: the last holder's batch marks say they
    /// are queued (a Redis Cluster store).
    pub(crate) requeues_avoided: Counter,
    cursor_missing: Family<SourceLabel, Counter>,
    /// Hooks whose delivery lease this instance holds.
    pub(crate) hooks_held: Gauge,
    /// Live instances, as this one last counted them.
    pub(crate) instances: Gauge,
    pub(crate) hook_leases_taken: Counter,
    pub(crate) hook_leases_released: Counter,
    pub(crate) hook_leases_lost: Counter,
    /// By source: messages kept while not holding the lease.
    kept: Family<SourceLabel, Gauge>,
    /// By source: for how long every message has been kept (seconds).
    kept_seconds: Family<SourceLabel, Gauge<f64, AtomicU64>>,
    /// 1 while this instance could resume where the holder stands (or holds the lease).
    pub(crate) cursor_reachable: Gauge,
    pub(crate) deferrals: Counter,
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
            "hookrelay_fleet_requeues_avoided",
            "Callbacks of messages queued on taking the lease that were not queued again: the \
             last holder had queued them but died before its cursors moved (Redis Cluster)",
            self.requeues_avoided.clone(),
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
        r.register(
            "hookrelay_fleet_kept_messages",
            "Bus messages of each source this instance keeps while it does not hold the fleet lease",
            self.kept.clone(),
        );
        r.register(
            "hookrelay_fleet_kept_seconds",
            "For how long every message of each source has been kept here (since the \
             subscription, or since the last message let go): how far back this instance reaches",
            self.kept_seconds.clone(),
        );
        r.register(
            "hookrelay_fleet_cursor_reachable",
            "1 while this instance's kept messages reach back to where the lease holder stands in \
             every source (it may take a free lease at once), or it holds the lease",
            self.cursor_reachable.clone(),
        );
        r.register(
            "hookrelay_fleet_lease_deferrals",
            "Times this instance found the fleet lease free and left it to an instance whose kept \
             messages reach further back",
            self.deferrals.clone(),
        );
    }

    /// Sets the kept-message series of `source`.
    pub(crate) fn set_kept(&self, source: &str, kept: usize, whole: std::time::Duration) {
        let label = SourceLabel {
            source: source.to_string(),
        };
        self.kept
            .get_or_create(&label)
            .set(i64::try_from(kept).unwrap_or(i64::MAX));
        self.kept_seconds
            .get_or_create(&label)
            .set(whole.as_secs_f64());
    }

    /// Counts a cursor of `source` not found.
    pub(crate) fn cursor_not_found(&self, source: &str) {
        self.cursor_missing
            .get_or_create(&SourceLabel {
                source: source.to_string(),
            })
            .inc();
    }
}

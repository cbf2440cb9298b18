//! The tenants' series: how many the relay knows, what it found wrong in Scalelite's records,
//! and reads of Scalelite's Redis that failed. No series names a tenant's secret; none is per
//! tenant either (a cluster may have thousands).

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::xapi::ReasonLabel;

#[derive(Default)]
pub(crate) struct TenantMetrics {
    /// Tenants in force (Scalelite's and the configuration's).
    pub(crate) known: Gauge,
    /// Records of Scalelite's tenants the last read found unusable, by reason.
    problems: Family<ReasonLabel, Gauge>,
    /// Reads of Scalelite's Redis that failed (the last good tenants stayed in force).
    pub(crate) read_failures: Counter,
    /// 1 while the tenants in force are the view kept in the store (a start while Scalelite's
    /// Redis could not be read), until it is read.
    pub(crate) from_store: Gauge,
}

impl TenantMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_tenants",
            "Tenants in force, from Scalelite's Redis and the configuration",
            self.known.clone(),
        );
        r.register(
            "hookrelay_tenant_problems",
            "Records of Scalelite's tenants the last read found unusable, by reason \
             (no_record, no_name, no_secrets, name_index: each keeps its last good version; \
             operator_secret, weak_secret: refused)",
            self.problems.clone(),
        );
        r.register(
            "hookrelay_tenant_read_failures",
            "Reads of Scalelite's Redis that failed; the last good tenants stayed in force",
            self.read_failures.clone(),
        );
        r.register(
            "hookrelay_tenants_from_store",
            "1 while the tenants in force are the last good view of Scalelite's kept in the \
             store (its Redis not read since the start)",
            self.from_store.clone(),
        );
    }

    /// Sets the count of problems of `reason`.
    pub(crate) fn set_problems(&self, reason: &'static str, n: i64) {
        self.problems
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .set(n);
    }
}

//! The traces' own series (`[tracing]`): spans exported, and spans dropped by reason, so that
//! an unreachable collector shows without ever holding a delivery back.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabel {
    reason: &'static str,
}

#[derive(Default)]
pub(crate) struct TraceMetrics {
    /// Spans the collector took.
    exported: Counter,
    /// Spans lost, by reason: `queue_full` (more were waiting than `tracing.max_queue`),
    /// `export_failed` (the collector refused them or did not answer in time).
    dropped: Family<DropLabel, Counter>,
}

impl TraceMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_trace_spans_exported",
            "Spans the OTLP collector took",
            self.exported.clone(),
        );
        r.register(
            "hookrelay_trace_spans_dropped",
            "Spans never exported, by reason (queue_full, export_failed)",
            self.dropped.clone(),
        );
    }

    /// `n` spans the collector took.
    pub(crate) fn exported(&self, n: usize) {
        self.exported.inc_by(n as u64);
    }

    /// `n` spans lost because the export queue was full.
    pub(crate) fn queue_full(&self, n: usize) {
        self.dropped
            .get_or_create(&DropLabel {
                reason: "queue_full",
            })
            .inc_by(n as u64);
    }

    /// `n` spans of a batch the collector refused or did not take in time.
    pub(crate) fn export_failed(&self, n: usize) {
        self.dropped
            .get_or_create(&DropLabel {
                reason: "export_failed",
            })
            .inc_by(n as u64);
    }

    /// The series at 0 from the start, once traces are on.
    pub(crate) fn touch(&self) {
        self.queue_full(0);
        self.export_failed(0);
    }
}

//! The xAPI output's series: statements by LRS host (a bounded label: hosts come from the
//! configuration and from meetings' encrypted payloads, which only the server's secret makes).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LrsLabel {
    lrs: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LrsReasonLabels {
    pub(crate) lrs: String,
    pub(crate) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: String,
}

/// LRS request latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

pub(crate) struct XapiMetrics {
    /// Statements the LRS took (2xx, or 409: it holds that id already).
    pub(crate) sent: Family<LrsLabel, Counter>,
    /// Tries that failed, by reason (`connect`, `timeout`, `status_5xx`, `status_429`, ...);
    /// a statement is tried again unless the reason is a refusal (`rejected_4xx`).
    pub(crate) failed: Family<LrsReasonLabels, Counter>,
    /// Statements waiting for their LRS.
    pub(crate) queued: Family<LrsLabel, Gauge>,
    pub(crate) latency: Family<LrsLabel, Histogram, fn() -> Histogram>,
    /// Events that made no statement, by reason (`disabled`, `unknown_user`, `bad_payload`, ...).
    skipped: Family<ReasonLabel, Counter>,
}

impl Default for XapiMetrics {
    fn default() -> Self {
        Self {
            sent: Family::default(),
            failed: Family::default(),
            queued: Family::default(),
            latency: Family::new_with_constructor(histogram),
            skipped: Family::default(),
        }
    }
}

impl XapiMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_xapi_statements_sent",
            "xAPI statements an LRS took, by LRS host",
            self.sent.clone(),
        );
        r.register(
            "hookrelay_xapi_statement_failures",
            "xAPI statement posts that failed, by LRS host and reason",
            self.failed.clone(),
        );
        r.register(
            "hookrelay_xapi_statements_queued",
            "xAPI statements waiting for their LRS, by LRS host",
            self.queued.clone(),
        );
        r.register(
            "hookrelay_xapi_lrs_latency_seconds",
            "Time an LRS took to answer a statement post, by LRS host",
            self.latency.clone(),
        );
        r.register(
            "hookrelay_xapi_events_skipped",
            "Events of the xAPI catalogue that made no statement, by reason",
            self.skipped.clone(),
        );
    }

    pub(crate) fn skip(&self, reason: &str) {
        self.skipped
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    pub(crate) fn lrs(lrs: &str) -> LrsLabel {
        LrsLabel { lrs: lrs.into() }
    }
}

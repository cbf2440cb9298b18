//! The destinations' series (`[[destinations]]`), by destination name (a bounded label: the
//! names come from the configuration only).

use std::{sync::atomic::AtomicU64, time::Duration};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DestinationLabel {
    destination: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DestinationReasonLabels {
    destination: String,
    reason: String,
}

/// Publish latency buckets, in seconds (a confirmation included).
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

pub(crate) struct DestinationMetrics {
    /// Messages the broker confirmed (a file: written and flushed).
    published: Family<DestinationLabel, Counter>,
    /// Tries that failed, by reason (`connect`, `auth`, `not_found`, `timeout`, `nack`, `io`):
    /// the message waits and is tried again.
    failed: Family<DestinationReasonLabels, Counter>,
    /// Messages never published, by reason (`too_large`: over the broker's limit;
    /// `queue_full`: the queue held `max_queue`; `plugin`: a plugin dropped it).
    skipped: Family<DestinationReasonLabels, Counter>,
    /// Messages waiting.
    queued: Family<DestinationLabel, Gauge>,
    /// Age of the oldest message waiting, in seconds.
    oldest: Family<DestinationLabel, Gauge<f64, AtomicU64>>,
    /// 1 while the last try succeeded, 0 while the destination fails.
    up: Family<DestinationLabel, Gauge>,
    latency: Family<DestinationLabel, Histogram, fn() -> Histogram>,
}

impl Default for DestinationMetrics {
    fn default() -> Self {
        Self {
            published: Family::default(),
            failed: Family::default(),
            skipped: Family::default(),
            queued: Family::default(),
            oldest: Family::default(),
            up: Family::default(),
            latency: Family::new_with_constructor(histogram),
        }
    }
}

fn label(name: &str) -> DestinationLabel {
    DestinationLabel {
        destination: name.into(),
    }
}

fn reason(name: &str, reason: &str) -> DestinationReasonLabels {
    DestinationReasonLabels {
        destination: name.into(),
        reason: reason.into(),
    }
}

impl DestinationMetrics {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "hookrelay_destination_published",
            "Messages a destination's broker confirmed (a file: written and flushed), by destination",
            self.published.clone(),
        );
        r.register(
            "hookrelay_destination_failures",
            "Publishes that failed and wait to be tried again, by destination and reason",
            self.failed.clone(),
        );
        r.register(
            "hookrelay_destination_skipped",
            "Messages never published, by destination and reason (too_large, queue_full, plugin)",
            self.skipped.clone(),
        );
        r.register(
            "hookrelay_destination_queued",
            "Messages waiting for their destination",
            self.queued.clone(),
        );
        r.register(
            "hookrelay_destination_oldest_age_seconds",
            "Age of the oldest message waiting for its destination",
            self.oldest.clone(),
        );
        r.register(
            "hookrelay_destination_up",
            "1 while a destination takes messages, 0 while it fails",
            self.up.clone(),
        );
        r.register(
            "hookrelay_destination_publish_seconds",
            "Time from a publish to the broker's confirmation, by destination",
            self.latency.clone(),
        );
    }

    pub(crate) fn published(&self, name: &str) {
        self.published.get_or_create(&label(name)).inc();
    }

    pub(crate) fn failed(&self, name: &str, why: &str) {
        self.failed.get_or_create(&reason(name, why)).inc();
    }

    pub(crate) fn skipped(&self, name: &str, why: &str) {
        self.skipped.get_or_create(&reason(name, why)).inc();
    }

    /// A message not queued: the queue is full.
    pub(crate) fn refused(&self, name: &str) {
        self.skipped(name, "queue_full");
    }

    pub(crate) fn depth(&self, name: &str, depth: usize) {
        self.queued
            .get_or_create(&label(name))
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    pub(crate) fn oldest(&self, name: &str, age: Duration) {
        self.oldest
            .get_or_create(&label(name))
            .set(age.as_secs_f64());
    }

    pub(crate) fn up(&self, name: &str, up: bool) {
        self.up.get_or_create(&label(name)).set(i64::from(up));
    }

    pub(crate) fn observe(&self, name: &str, took: Duration) {
        self.latency
            .get_or_create(&label(name))
            .observe(took.as_secs_f64());
    }
}

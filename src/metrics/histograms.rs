//! The histograms of the relay's own series, each with its bucket bounds.

use prometheus_client::metrics::{family::Family, histogram::Histogram};

use super::labels::{ApiCallLabels, PluginLabel};

/// Upper bounds (seconds) of the callback latency buckets: a millisecond to the retry schedule.
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Seconds from a bus message's arrival to the 2xx of one of its callbacks.
#[derive(Clone, Debug)]
pub(crate) struct LatencyHistogram(pub Histogram);

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self(Histogram::new(LATENCY_BUCKETS))
    }
}

/// bbb-exporter's bucket bounds (seconds) for `bbb_api_latency`.
const API_LATENCY_BUCKETS: [f64; 17] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 5.0, 7.5, 10.0,
];

/// `bbb_api_latency`'s family, with bbb-exporter's buckets.
#[derive(Clone, Debug)]
pub(crate) struct ApiLatency(pub Family<ApiCallLabels, Histogram, fn() -> Histogram>);

impl Default for ApiLatency {
    fn default() -> Self {
        Self(Family::new_with_constructor(|| {
            Histogram::new(API_LATENCY_BUCKETS)
        }))
    }
}

/// Bucket bounds (seconds) of `hookrelay_plugin_call_seconds`: from a Rust plugin's tens of
/// microseconds to a deadline's hundreds of milliseconds.
const PLUGIN_CALL_BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5,
];

/// `hookrelay_plugin_call_seconds`' family: one histogram per plugin.
#[derive(Clone, Debug)]
pub(crate) struct PluginCallTime(pub Family<PluginLabel, Histogram, fn() -> Histogram>);

impl Default for PluginCallTime {
    fn default() -> Self {
        Self(Family::new_with_constructor(|| {
            Histogram::new(PLUGIN_CALL_BUCKETS)
        }))
    }
}

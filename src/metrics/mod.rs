//! Prometheus metrics: the relay's own series ([`Metrics`]) and the `/metrics` endpoint, behind
//! the optional credentials of [`auth`]; [`live`] holds the series computed at scrape time.
//! The series' label sets are in `labels`, their histograms' buckets in `histograms`, their
//! registration in `register`, the per-hook queue series in `queues`, and the HTTP endpoint in
//! `endpoint`.

mod auth;
mod bounds;
mod bus;
mod destinations;
mod endpoint;
mod fleet;
mod histograms;
mod hosts;
mod labels;
mod live;
pub mod merge;
mod queues;
mod register;
mod tenants;
mod traces;
mod xapi;

pub(crate) use auth::{Access, require_access};
pub(crate) use bus::SourceMetrics;
pub(crate) use hosts::{Hosts, require};
pub(crate) use xapi::{LrsReasonLabels, XapiMetrics};

use std::sync::Arc;

use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

pub(crate) use endpoint::router;
pub(crate) use histograms::{ApiLatency, LatencyHistogram, PluginCallTime};
pub(crate) use labels::{
    ApiCallLabels, ApiLabels, EventIdLabel, HookLabel, KindLabel, PluginActionLabels,
    PluginErrorLabels, PluginLabel, PluginRuleLabels, ReceiverLabel, ResultLabel, SourceLabel,
    SourceResultLabels, TenantLabel, TenantReasonLabels, VersionLabel,
};

/// How many hooks of each kind there are (for `hookrelay_hooks{kind}`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HookCounts {
    pub(crate) global: i64,
    pub(crate) meeting: i64,
    pub(crate) raw: i64,
    pub(crate) permanent: i64,
    pub(crate) disabled: i64,
}

/// Every series the relay exports. Labels are bounded: never a URL (it may carry tokens), never
/// a free-form id.
#[derive(Default)]
pub struct Metrics {
    registry: Registry,
    /// Per source.
    pub bus: bus::BusMetrics,
    pub(crate) fleet: fleet::FleetMetrics,
    pub(crate) xapi: xapi::XapiMetrics,
    pub(crate) destinations: destinations::DestinationMetrics,
    pub(crate) tenants: tenants::TenantMetrics,
    /// Spans exported and dropped (`[tracing]`).
    pub(crate) traces: traces::TraceMetrics,
    /// Callbacks delivered, by tenant (empty: the operator's hooks).
    pub(crate) callbacks_delivered: Family<TenantLabel, Counter>,
    /// Failed attempts, by tenant and reason.
    pub(crate) callback_failures: Family<TenantReasonLabels, Counter>,
    /// Hooks removed by the relay, by tenant and reason (`failures`, `tenant_unknown`).
    pub(crate) hooks_removed: Family<TenantReasonLabels, Counter>,
    /// Hooks disabled by the relay, by tenant and reason (`failures`: their retries ran out
    /// with `delivery.on_give_up = "disable"`; `tenant_unknown`: their tenant is gone).
    pub(crate) hooks_disabled: Family<TenantReasonLabels, Counter>,
    /// Audit records that could not be written.
    pub(crate) audit_write_failures: Counter,
    /// Time callbacks waited for their receiver's rate (`[[delivery.receivers]]`), seconds.
    pub(crate) receiver_rate_wait:
        Family<ReceiverLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// Events about hooks told (`hook-failing`, ...), by event id.
    hook_notices: Family<EventIdLabel, Counter>,
    /// 1 while a receiver's circuit is open (`delivery.circuit_after`), by host and port.
    pub(crate) receiver_circuit_open: Family<ReceiverLabel, Gauge>,
    /// Rounds of hooks' attempts and states that could not be written to the store.
    pub(crate) insight_write_failures: Counter,
    /// Callbacks queued again by `hookrelay redeliver`.
    pub(crate) redelivered: Counter,
    pub(crate) queue_dropped: Counter,
    /// Of those, dropped for the byte budget of all queues.
    pub(crate) queue_dropped_by_budget: Counter,
    /// `delivery.queue_budget_mb` in bytes, and what the queues take of it (estimated).
    pub(crate) queue_budget_bytes: Gauge,
    pub(crate) queue_bytes: Gauge,
    pub(crate) queue_append_conflicts: Counter,
    /// Store writes that fewer replicas than `store.wait_replicas` had in time.
    pub(crate) store_unreplicated: Counter,
    queued_callbacks: Gauge,
    pub(crate) delivery_workers: Gauge,
    hooks_registered: Gauge,
    hooks_by_kind: Family<KindLabel, Gauge>,
    pub(crate) hooks_refused: Counter,
    pub(crate) callback_latency: LatencyHistogram,
    queue_depth: Family<HookLabel, Gauge>,
    /// The age of the oldest callback queued per hook, for the hooks with callbacks queued.
    queue_oldest_age: Family<HookLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The hooks that have a `queue_oldest_age` series now.
    oldest_hooks: std::sync::Mutex<Vec<HookLabel>>,
    /// The hooks that have a `queue_depth` series now.
    depth_hooks: std::sync::Mutex<Vec<HookLabel>>,
    pub(crate) conference_seeds: Family<SourceResultLabels, Counter>,
    merge_up: Family<SourceLabel, Gauge>,
    merge_duration: Family<SourceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    merge_left_out: Family<SourceLabel, Counter>,
    build_info: Family<VersionLabel, Gauge>,
    pub(crate) meeting_mappings: Gauge,
    pub(crate) user_mappings: Gauge,
    pub(crate) api_requests: Family<ApiLabels, Counter>,
    pub(crate) plugin_calls: Family<PluginActionLabels, Counter>,
    pub(crate) plugin_errors: Family<PluginErrorLabels, Counter>,
    /// Wall-clock time of each plugin call, failed or not, by plugin.
    pub(crate) plugin_call_seconds: PluginCallTime,
    pub(crate) plugin_failed: Family<PluginLabel, Gauge>,
    /// Events a plugin's named rule matched (`count-rule-match`).
    pub(crate) plugin_rule_matches: Family<PluginRuleLabels, Counter>,
    /// Plugin calls moved off idle-priority threads because they waited too long for CPU.
    pub(crate) plugin_starved: Counter,
    pub(crate) plugin_reloads: Family<ResultLabel, Counter>,
    pub(crate) plugins_loaded: Gauge,
    pub(crate) plugin_dropped: Counter,
    pub(crate) plugin_compiles: Family<SourceLabel, Counter>,
    pub(crate) plugin_load_failed: Family<PluginLabel, Gauge>,
    /// bbb-exporter's `bbb_api_latency{endpoint,parameters}`: the relay's calls to BBB's API.
    bbb_api_latency: ApiLatency,
    /// Families written as text at the end of the exposition.
    texts: Vec<Box<dyn TextFamilies>>,
}

/// Series computed at scrape time: collectors of the metrics crate, and families it cannot
/// encode ([`TextFamilies`]).
#[derive(Default)]
pub struct Exports {
    pub(crate) collectors: Vec<Box<dyn prometheus_client::collector::Collector>>,
    pub(crate) texts: Vec<Box<dyn TextFamilies>>,
}

/// Families that the metrics crate cannot encode (OpenMetrics gauge histograms), written as
/// OpenMetrics text at the start of the exposition.
pub(crate) trait TextFamilies: Send + Sync + std::fmt::Debug {
    fn write(&self, out: &mut String);
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        Self::with_exports(|_| Exports::default())
    }

    /// As [`Metrics::new`], with more series computed at scrape time (the conference state):
    /// `exports` makes them from the metrics' own handles (the bus's connection gauges, say).
    pub fn with_exports(exports: impl FnOnce(&Metrics) -> Exports) -> Arc<Self> {
        let mut m = Metrics::default();
        let Exports { collectors, texts } = exports(&m);
        for c in collectors {
            m.registry.register_collector(c);
        }
        m.texts = texts;
        let mut registry = std::mem::take(&mut m.registry);
        let r = &mut registry;
        r.register(
            "bbb_api_latency",
            "BigBlueButton API call latency (the relay's own getMeetings and getRecordings calls)",
            m.bbb_api_latency.0.clone(),
        );
        m.bus.register(r);
        m.fleet.register(r);
        m.xapi.register(r);
        m.destinations.register(r);
        m.tenants.register(r);
        m.traces.register(r);
        m.register_delivery(r);
        m.register_relay(r);
        m.register_plugins(r);
        m.registry = registry;
        // The operator's series exist from the start, at 0, as they did before they had a
        // tenant label: a dashboard's increase() of them has data on a quiet relay.
        let operator = labels::TenantReasonLabels::of(None, "failures");
        let _ = m.callbacks_delivered.get_or_create(&TenantLabel::of(None));
        let _ = m.hooks_removed.get_or_create(&operator);
        let _ = m.hooks_disabled.get_or_create(&operator);
        Arc::new(m)
    }

    /// Sets the hook counts from the registry's current snapshot.
    pub fn count_hooks(&self, total: usize, c: HookCounts) {
        self.hooks_registered.set(total as i64);
        for (kind, n) in [
            ("global", c.global),
            ("meeting", c.meeting),
            ("raw", c.raw),
            ("permanent", c.permanent),
            ("disabled", c.disabled),
        ] {
            self.hooks_by_kind.get_or_create(&KindLabel { kind }).set(n);
        }
    }

    /// Counts one event about a hook (`hook-failing`, ...).
    pub fn count_hook_notice(&self, id: &str) {
        self.hook_notices
            .get_or_create(&EventIdLabel {
                event: id.to_string(),
            })
            .inc();
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // First, so that the families the crate writes stay exactly as it writes them (the
        // merged endpoint's parser does not take an empty family followed by another).
        for t in &self.texts {
            t.write(&mut out);
        }
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Counts one call of BBB's API `endpoint` with `parameters` that took `seconds`.
    pub fn observe_api_call(&self, endpoint: &str, parameters: &str, seconds: f64) {
        self.bbb_api_latency
            .0
            .get_or_create(&ApiCallLabels {
                endpoint: endpoint.to_string(),
                parameters: parameters.to_string(),
            })
            .observe(seconds);
    }
}

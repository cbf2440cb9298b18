//! Prometheus metrics: the relay's own series ([`Metrics`]) and the `/metrics` endpoint, behind
//! the optional credentials of [`auth`]; [`live`] holds the series computed at scrape time.

use crate::base::ids::HookId;

pub mod auth;
pub mod bus;
pub mod fleet;
pub mod hosts;
pub mod live;
pub mod merge;
pub mod xapi;

use std::sync::Arc;

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    pub call: String,
    pub returncode: String,
    pub message_key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabel {
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginActionLabels {
    pub plugin: String,
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginRuleLabels {
    pub plugin: String,
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginErrorLabels {
    pub plugin: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceResultLabels {
    pub source: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabel {
    pub hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabel {
    pub version: &'static str,
}

/// Upper bounds (seconds) of the callback latency buckets: a millisecond to the retry schedule.
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Seconds from a bus message's arrival to the 2xx of one of its callbacks.
#[derive(Clone, Debug)]
pub struct LatencyHistogram(pub Histogram);

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self(Histogram::new(LATENCY_BUCKETS))
    }
}

/// How many hooks of each kind there are (for `hookrelay_hooks{kind}`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HookCounts {
    pub global: i64,
    pub meeting: i64,
    pub raw: i64,
    pub permanent: i64,
}

/// Every series the relay exports. Labels are bounded: never a URL (it may carry tokens), never
/// a free-form id.
#[derive(Default)]
pub struct Metrics {
    registry: Registry,
    /// Per source.
    pub bus: bus::BusMetrics,
    pub fleet: fleet::FleetMetrics,
    pub xapi: xapi::XapiMetrics,
    pub callbacks_delivered: Counter,
    pub callback_failures: Family<ReasonLabel, Counter>,
    pub hooks_removed: Counter,
    /// Rounds of hooks' attempts and states that could not be written to the store.
    pub insight_write_failures: Counter,
    /// Callbacks queued again by `hookrelay redeliver`.
    pub redelivered: Counter,
    pub queue_dropped: Counter,
    /// Of those, dropped for the byte budget of all queues.
    pub queue_dropped_by_budget: Counter,
    /// `delivery.queue_budget_mb` in bytes, and what the queues take of it (estimated).
    pub queue_budget_bytes: Gauge,
    pub queue_bytes: Gauge,
    pub queue_append_conflicts: Counter,
    /// Store writes that fewer replicas than `store.wait_replicas` had in time.
    pub store_unreplicated: Counter,
    pub queued_callbacks: Gauge,
    pub delivery_workers: Gauge,
    pub hooks_registered: Gauge,
    pub hooks_by_kind: Family<KindLabel, Gauge>,
    pub hooks_refused: Counter,
    pub callback_latency: LatencyHistogram,
    pub queue_depth: Family<HookLabel, Gauge>,
    /// The age of the oldest callback queued per hook, for the hooks with callbacks queued.
    pub queue_oldest_age: Family<HookLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The hooks that have a `queue_oldest_age` series now.
    oldest_hooks: std::sync::Mutex<Vec<HookId>>,
    /// The hooks that have a `queue_depth` series now.
    depth_hooks: std::sync::Mutex<Vec<HookId>>,
    pub conference_seeds: Family<SourceResultLabels, Counter>,
    pub merge_up: Family<SourceLabel, Gauge>,
    pub merge_duration: Family<SourceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub merge_left_out: Family<SourceLabel, Counter>,
    pub build_info: Family<VersionLabel, Gauge>,
    pub meeting_mappings: Gauge,
    pub user_mappings: Gauge,
    pub api_requests: Family<ApiLabels, Counter>,
    pub plugin_calls: Family<PluginActionLabels, Counter>,
    pub plugin_errors: Family<PluginErrorLabels, Counter>,
    /// Wall-clock time of each plugin call, failed or not, by plugin.
    pub plugin_call_seconds: PluginCallTime,
    pub plugin_failed: Family<PluginLabel, Gauge>,
    /// Events a plugin's named rule matched (`count-rule-match`).
    pub plugin_rule_matches: Family<PluginRuleLabels, Counter>,
    /// Plugin calls moved off idle-priority threads because they waited too long for CPU.
    pub plugin_starved: Counter,
    pub plugin_reloads: Family<ResultLabel, Counter>,
    pub plugins_loaded: Gauge,
    pub plugin_dropped: Counter,
    pub plugin_compiles: Family<SourceLabel, Counter>,
    pub plugin_load_failed: Family<PluginLabel, Gauge>,
    /// bbb-exporter's `bbb_api_latency{endpoint,parameters}`: the relay's calls to BBB's API.
    pub bbb_api_latency: ApiLatency,
    /// Families written as text at the end of the exposition.
    texts: Vec<Box<dyn TextFamilies>>,
}

/// Series computed at scrape time: collectors of the metrics crate, and families it cannot
/// encode ([`TextFamilies`]).
#[derive(Default)]
pub struct Exports {
    pub collectors: Vec<Box<dyn prometheus_client::collector::Collector>>,
    pub texts: Vec<Box<dyn TextFamilies>>,
}

/// Families that the metrics crate cannot encode (OpenMetrics gauge histograms), written as
/// OpenMetrics text at the start of the exposition.
pub trait TextFamilies: Send + Sync + std::fmt::Debug {
    fn write(&self, out: &mut String);
}

/// The labels of `bbb_api_latency`: the API call and its parameters (`state=published`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiCallLabels {
    pub endpoint: String,
    pub parameters: String,
}

/// bbb-exporter's bucket bounds (seconds) for `bbb_api_latency`.
const API_LATENCY_BUCKETS: [f64; 17] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 5.0, 7.5, 10.0,
];

/// `bbb_api_latency`'s family, with bbb-exporter's buckets.
#[derive(Clone, Debug)]
pub struct ApiLatency(pub Family<ApiCallLabels, Histogram, fn() -> Histogram>);

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
pub struct PluginCallTime(pub Family<PluginLabel, Histogram, fn() -> Histogram>);

impl Default for PluginCallTime {
    fn default() -> Self {
        Self(Family::new_with_constructor(|| {
            Histogram::new(PLUGIN_CALL_BUCKETS)
        }))
    }
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
        m.register_delivery(r);
        m.register_relay(r);
        m.register_plugins(r);
        m.registry = registry;
        Arc::new(m)
    }

    /// The queues and the callbacks.
    fn register_delivery(&self, r: &mut Registry) {
        r.register(
            "hookrelay_callbacks_delivered",
            "Callbacks answered with 2xx",
            self.callbacks_delivered.clone(),
        );
        r.register(
            "hookrelay_callback_failures",
            "Failed callback attempts, by reason (status code, timeout, connect, request)",
            self.callback_failures.clone(),
        );
        r.register(
            "hookrelay_hooks_removed",
            "Hooks removed after their retry schedule ran out",
            self.hooks_removed.clone(),
        );
        r.register(
            "hookrelay_redelivered",
            "Callbacks queued again by hookrelay redeliver (the admin API)",
            self.redelivered.clone(),
        );
        r.register(
            "hookrelay_insight_write_failures",
            "Rounds of the hooks' delivery attempts and states that could not be written to the store (those records are lost; the callbacks are not)",
            self.insight_write_failures.clone(),
        );
        r.register(
            "hookrelay_queue_dropped",
            "Callbacks dropped because their hook's queue was full",
            self.queue_dropped.clone(),
        );
        r.register(
            "hookrelay_queue_dropped_by_budget",
            "Callbacks dropped because the queues together took more than delivery.queue_budget_mb \
             and their hook's queue more than its share (also counted in hookrelay_queue_dropped)",
            self.queue_dropped_by_budget.clone(),
        );
        r.register(
            "hookrelay_queue_budget_bytes",
            "The bytes of Redis all hooks' queues may take together (delivery.queue_budget_mb)",
            self.queue_budget_bytes.clone(),
        );
        r.register(
            "hookrelay_queue_bytes",
            "The bytes of Redis the queues this instance delivers take, as estimated (sampled every 10 s)",
            self.queue_bytes.clone(),
        );
        r.register(
            "hookrelay_queue_append_conflicts",
            "Callbacks not written to their hook's queue because it already held that id or a later one",
            self.queue_append_conflicts.clone(),
        );
        r.register(
            "hookrelay_store_unreplicated_writes",
            "Batches of queued callbacks or delivery marks that fewer of the store's replicas than \
             store.wait_replicas had within store.wait_timeout_ms (a failover then could take them back)",
            self.store_unreplicated.clone(),
        );
        r.register(
            "hookrelay_delivery_workers",
            "Hooks with a delivery worker running",
            self.delivery_workers.clone(),
        );
        r.register(
            "hookrelay_queued_callbacks",
            "Callbacks waiting in the hooks' queues (sampled every 10 s)",
            self.queued_callbacks.clone(),
        );
        r.register(
            "hookrelay_hooks_registered",
            "Hooks registered",
            self.hooks_registered.clone(),
        );
        r.register(
            "hookrelay_hooks_by_kind",
            "Hooks registered, by kind (global, meeting, raw, permanent; a hook may be of several)",
            self.hooks_by_kind.clone(),
        );
        r.register(
            "hookrelay_callback_latency_seconds",
            "From a bus message's arrival to the 2xx of one of its callbacks (callbacks resumed \
             after a restart are not counted)",
            self.callback_latency.0.clone(),
        );
        r.register(
            "hookrelay_queue_depth",
            "Callbacks waiting in one hook's queue, by hook id (sampled every 10 s)",
            self.queue_depth.clone(),
        );
        r.register(
            "hookrelay_queue_oldest_age_seconds",
            "Age of the oldest callback waiting in one hook's queue, by hook id, for hooks with callbacks waiting (sampled every 10 s)",
            self.queue_oldest_age.clone(),
        );
    }

    /// The relay itself: its build, its seeds and merges, the API's requests and refusals.
    fn register_relay(&self, r: &mut Registry) {
        r.register(
            "hookrelay_build_info",
            "The relay's version, as a label of a constant 1",
            self.build_info.clone(),
        );
        self.build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        r.register(
            "hookrelay_conference_seeds",
            "getMeetings calls that seeded the conference state, by source and result (ok, error)",
            self.conference_seeds.clone(),
        );
        r.register(
            "hookrelay_merge_up",
            "1 if the last scrape of /metrics/all got this source's metrics, 0 if it failed, \
             timed out or sent what does not parse",
            self.merge_up.clone(),
        );
        r.register(
            "hookrelay_merge_duration_seconds",
            "How long the last fetch of this source took",
            self.merge_duration.clone(),
        );
        r.register(
            "hookrelay_merge_left_out",
            "Metric families of this source left out of /metrics/all because another source \
             had already given that name another TYPE",
            self.merge_left_out.clone(),
        );
        r.register(
            "hookrelay_hooks_refused",
            "Stored or reference hooks not loaded at start because hooks/create would refuse \
             their callback URL",
            self.hooks_refused.clone(),
        );
        r.register(
            "hookrelay_meeting_mappings",
            "Internal to external meeting id mappings held",
            self.meeting_mappings.clone(),
        );
        r.register(
            "hookrelay_user_mappings",
            "Internal to external user id mappings held",
            self.user_mappings.clone(),
        );
        r.register(
            "hookrelay_api_requests",
            "Hooks API calls answered, by call, returncode and messageKey",
            self.api_requests.clone(),
        );
    }

    /// The plugins.
    fn register_plugins(&self, r: &mut Registry) {
        r.register(
            "hookrelay_plugin_calls",
            "Plugin calls that returned an action, by plugin and action (keep, replace, drop)",
            self.plugin_calls.clone(),
        );
        r.register(
            "hookrelay_plugin_call_seconds",
            "Time of one plugin call (CPU and waiting inside the host), by plugin, failed calls too",
            self.plugin_call_seconds.0.clone(),
        );
        r.register(
            "hookrelay_plugin_errors",
            "Plugin calls that failed, by plugin and kind (timeout, memory, trap, invalid_json, \
             marked_failed, not_loaded)",
            self.plugin_errors.clone(),
        );
        r.register(
            "hookrelay_plugin_rule_matches",
            "Events each rule of a plugin matched, by plugin and rule (the rules plugin counts the \
             rule that decided)",
            self.plugin_rule_matches.clone(),
        );
        r.register(
            "hookrelay_plugin_starved",
            "Plugin calls that waited half a second for CPU at idle priority and moved to a thread \
             at the relay's priority (cpu_priority = auto): the machine is saturated",
            self.plugin_starved.clone(),
        );
        r.register(
            "hookrelay_plugin_failed",
            "1 while a plugin is marked failed or cannot be loaded",
            self.plugin_failed.clone(),
        );
        r.register(
            "hookrelay_plugin_reloads",
            "Plugin folder loads, by result (ok, or error when a file could not be loaded)",
            self.plugin_reloads.clone(),
        );
        r.register(
            "hookrelay_plugins_loaded",
            "Plugins running",
            self.plugins_loaded.clone(),
        );
        r.register(
            "hookrelay_plugin_dropped",
            "Callbacks not sent because the plugin chain dropped them (by a plugin or its on_error)",
            self.plugin_dropped.clone(),
        );
        r.register(
            "hookrelay_plugin_compiles",
            "Plugins made ready to run, by source (compiled, or cache: read back compiled)",
            self.plugin_compiles.clone(),
        );
        r.register(
            "hookrelay_plugin_load_failed",
            "1 while a plugin's current file cannot be loaded (its previous version, or its \
             on_error policy, is in force)",
            self.plugin_load_failed.clone(),
        );
    }

    /// Sets the hook counts from the registry's current snapshot.
    pub fn count_hooks(&self, total: usize, c: HookCounts) {
        self.hooks_registered.set(total as i64);
        for (kind, n) in [
            ("global", c.global),
            ("meeting", c.meeting),
            ("raw", c.raw),
            ("permanent", c.permanent),
        ] {
            self.hooks_by_kind.get_or_create(&KindLabel { kind }).set(n);
        }
    }

    /// Sets the callbacks queued in all and per hook (`(hook, depth)`).
    pub fn report_queues(&self, depths: &[(HookId, usize)]) {
        let queued: usize = depths.iter().map(|(_, n)| n).sum();
        self.queued_callbacks.set(queued as i64);
        self.set_queue_depths(depths);
    }

    /// Sets the age of the oldest queued callback of each hook of `oldest` (timestamps, ms) at
    /// `now` (ms); hooks not in it lose their series.
    pub fn report_oldest(&self, now: u64, oldest: &[(HookId, u64)]) {
        let label = |hook: HookId| HookLabel {
            hook: hook.to_string(),
        };
        let mut had = self.oldest_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !oldest.iter().any(|(o, _)| o == *h)) {
            self.queue_oldest_age.remove(&label(*gone));
        }
        for (hook, ts) in oldest {
            let age = now.saturating_sub(*ts) as f64 / 1e3;
            self.queue_oldest_age.get_or_create(&label(*hook)).set(age);
        }
        *had = oldest.iter().map(|(h, _)| *h).collect();
    }

    /// Sets the per-hook queue depths; hooks not in `depths` lose their series.
    pub fn set_queue_depths(&self, depths: &[(HookId, usize)]) {
        let label = |hook: HookId| HookLabel {
            hook: hook.to_string(),
        };
        let mut had = self.depth_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !depths.iter().any(|(d, _)| d == *h)) {
            self.queue_depth.remove(&label(*gone));
        }
        for (hook, n) in depths {
            self.queue_depth.get_or_create(&label(*hook)).set(*n as i64);
        }
        *had = depths.iter().map(|(h, _)| *h).collect();
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

/// `GET /metrics` and the merged endpoint at `merge_path`, behind `access`.
pub fn router(
    metrics: Arc<Metrics>,
    merger: Arc<merge::Merger>,
    merge_path: &str,
    access: Arc<auth::Access>,
    hosts: Arc<hosts::Hosts>,
) -> Router {
    let open = access.is_open();
    let router = Router::new()
        .route("/metrics", get(serve))
        .with_state(metrics)
        .route(merge_path, get(serve_merged).with_state(merger))
        .layer(axum::middleware::from_fn_with_state(access, auth::require));
    // Without credentials, only for its own names (DNS rebinding).
    match open {
        true => router.layer(axum::middleware::from_fn_with_state(hosts, hosts::require)),
        false => router,
    }
}

async fn serve_merged(State(merger): State<Arc<merge::Merger>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        merger.scrape().await,
    )
}

async fn serve(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.render(),
    )
}

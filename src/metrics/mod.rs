//! Prometheus metrics: the relay's own series ([`Metrics`]) and the `/metrics` endpoint.

use std::sync::Arc;

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabel {
    pub event: String,
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

/// Every series the relay exports. Labels are bounded: never a URL (it may carry tokens), never
/// a free-form id.
#[derive(Default)]
pub struct Metrics {
    registry: Registry,
    pub bus_messages: Counter,
    pub bus_skipped: Family<ReasonLabel, Counter>,
    pub bus_reconnects: Counter,
    pub events_mapped: Family<EventLabel, Counter>,
    pub callbacks_delivered: Counter,
    pub callback_failures: Family<ReasonLabel, Counter>,
    pub hooks_removed: Counter,
    pub queue_dropped: Counter,
    pub queue_append_conflicts: Counter,
    pub queued_callbacks: Gauge,
    pub delivery_workers: Gauge,
    pub hooks_registered: Gauge,
    pub hooks_refused: Counter,
    pub meeting_mappings: Gauge,
    pub user_mappings: Gauge,
    pub api_requests: Family<ApiLabels, Counter>,
    pub plugin_calls: Family<PluginActionLabels, Counter>,
    pub plugin_errors: Family<PluginErrorLabels, Counter>,
    pub plugin_failed: Family<PluginLabel, Gauge>,
    pub plugin_reloads: Family<ResultLabel, Counter>,
    pub plugins_loaded: Gauge,
    pub plugin_dropped: Counter,
    pub plugin_compiles: Family<SourceLabel, Counter>,
    pub plugin_load_failed: Family<PluginLabel, Gauge>,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut m = Metrics::default();
        let r = &mut m.registry;
        r.register(
            "hookrelay_bus_messages",
            "Messages received from the bus",
            m.bus_messages.clone(),
        );
        r.register(
            "hookrelay_bus_skipped",
            "Bus messages skipped, by reason",
            m.bus_skipped.clone(),
        );
        r.register(
            "hookrelay_bus_reconnects",
            "Times the bus subscription was made again after a loss",
            m.bus_reconnects.clone(),
        );
        r.register(
            "hookrelay_events_mapped",
            "Processed events produced, by event id",
            m.events_mapped.clone(),
        );
        r.register(
            "hookrelay_callbacks_delivered",
            "Callbacks answered with 2xx",
            m.callbacks_delivered.clone(),
        );
        r.register(
            "hookrelay_callback_failures",
            "Failed callback attempts, by reason (status code, timeout, connect, request)",
            m.callback_failures.clone(),
        );
        r.register(
            "hookrelay_hooks_removed",
            "Hooks removed after their retry schedule ran out",
            m.hooks_removed.clone(),
        );
        r.register(
            "hookrelay_queue_dropped",
            "Callbacks dropped because their hook's queue was full",
            m.queue_dropped.clone(),
        );
        r.register(
            "hookrelay_queue_append_conflicts",
            "Callbacks not written to their hook's queue because it already held that id or a later one",
            m.queue_append_conflicts.clone(),
        );
        r.register(
            "hookrelay_delivery_workers",
            "Hooks with a delivery worker running",
            m.delivery_workers.clone(),
        );
        r.register(
            "hookrelay_queued_callbacks",
            "Callbacks waiting in the hooks' queues (sampled every 10 s)",
            m.queued_callbacks.clone(),
        );
        r.register(
            "hookrelay_hooks_registered",
            "Hooks registered",
            m.hooks_registered.clone(),
        );
        r.register(
            "hookrelay_hooks_refused",
            "Stored or reference hooks not loaded at start because hooks/create would refuse \
             their callback URL",
            m.hooks_refused.clone(),
        );
        r.register(
            "hookrelay_meeting_mappings",
            "Internal to external meeting id mappings held",
            m.meeting_mappings.clone(),
        );
        r.register(
            "hookrelay_user_mappings",
            "Internal to external user id mappings held",
            m.user_mappings.clone(),
        );
        r.register(
            "hookrelay_api_requests",
            "Hooks API calls answered, by call, returncode and messageKey",
            m.api_requests.clone(),
        );
        r.register(
            "hookrelay_plugin_calls",
            "Plugin calls that returned an action, by plugin and action (keep, replace, drop)",
            m.plugin_calls.clone(),
        );
        r.register(
            "hookrelay_plugin_errors",
            "Plugin calls that failed, by plugin and kind (timeout, memory, trap, invalid_json, \
             marked_failed, not_loaded)",
            m.plugin_errors.clone(),
        );
        r.register(
            "hookrelay_plugin_failed",
            "1 while a plugin is marked failed or cannot be loaded",
            m.plugin_failed.clone(),
        );
        r.register(
            "hookrelay_plugin_reloads",
            "Plugin folder loads, by result (ok, or error when a file could not be loaded)",
            m.plugin_reloads.clone(),
        );
        r.register(
            "hookrelay_plugins_loaded",
            "Plugins running",
            m.plugins_loaded.clone(),
        );
        r.register(
            "hookrelay_plugin_dropped",
            "Callbacks not sent because the plugin chain dropped them (by a plugin or its on_error)",
            m.plugin_dropped.clone(),
        );
        r.register(
            "hookrelay_plugin_compiles",
            "Plugins made ready to run, by source (compiled, or cache: read back compiled)",
            m.plugin_compiles.clone(),
        );
        r.register(
            "hookrelay_plugin_load_failed",
            "1 while a plugin's current file cannot be loaded (its previous version, or its \
             on_error policy, is in force)",
            m.plugin_load_failed.clone(),
        );
        Arc::new(m)
    }

    /// Counts a skipped bus message.
    pub fn skip(&self, reason: &str) {
        self.bus_skipped
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// `GET /metrics`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(serve))
        .with_state(metrics)
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

//! Registers the relay's own series with their names and help texts, by part of the relay:
//! delivery, the relay itself, the plugins.

use prometheus_client::registry::Registry;

use super::{Metrics, labels::VersionLabel};

impl Metrics {
    /// The callbacks and what became of their hooks; then the queues.
    pub(super) fn register_delivery(&self, r: &mut Registry) {
        r.register(
            "hookrelay_callbacks_delivered",
            "Callbacks answered with 2xx, by tenant (empty: the operator's hooks)",
            self.callbacks_delivered.clone(),
        );
        r.register(
            "hookrelay_callback_failures",
            "Failed callback attempts, by tenant and reason (status code, timeout, connect, request)",
            self.callback_failures.clone(),
        );
        r.register(
            "hookrelay_hooks_removed",
            "Hooks removed by the relay, by tenant and reason (failures: their retry schedule ran \
             out; tenant_unknown: their tenant stayed gone past tenancy.removed_grace_s)",
            self.hooks_removed.clone(),
        );
        r.register(
            "hookrelay_hooks_disabled",
            "Hooks disabled by the relay, by tenant and reason (failures: their retry schedule ran \
             out with delivery.on_give_up = \"disable\"; tenant_unknown: their tenant is gone)",
            self.hooks_disabled.clone(),
        );
        r.register(
            "hookrelay_audit_write_failures",
            "Audit records that could not be written to the store",
            self.audit_write_failures.clone(),
        );
        r.register(
            "hookrelay_receiver_rate_wait_seconds",
            "Time callbacks waited for their receiver's rate ([[delivery.receivers]]), by receiver",
            self.receiver_rate_wait.clone(),
        );
        r.register(
            "hookrelay_receiver_circuit_open",
            "1 while a receiver's circuit is open (its hooks wait, one probe at a time tries it), by host and port",
            self.receiver_circuit_open.clone(),
        );
        r.register(
            "hookrelay_hook_notices",
            "Events about hooks told (hook-failing, hook-disabled, hook-removed, hook-recovered)",
            self.hook_notices.clone(),
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
        self.register_queues(r);
    }

    /// The hooks, their queues and workers: what the queues hold, take and dropped, the
    /// callbacks' latency.
    fn register_queues(&self, r: &mut Registry) {
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
    pub(super) fn register_relay(&self, r: &mut Registry) {
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
            "Hooks API calls answered, by call, returncode, messageKey and tenant (empty: the operator, or a checksum that matched no one)",
            self.api_requests.clone(),
        );
    }

    /// The plugins.
    pub(super) fn register_plugins(&self, r: &mut Registry) {
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
}

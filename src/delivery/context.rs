//! What every hook's worker and pager share: the HTTP client, the store, the signer, the
//! bounds, the payloads read back; and what they do alike when a bound drops callbacks. The
//! bottom of delivery: it uses only the queue and Redis layout below it.

use crate::base::ids::HookId;

use std::{sync::Arc, time::Duration};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ack::Acker,
    budget::Budget,
    client::CallbackClient,
    hook_queue::HookQueue,
    insight::Insight,
    journal::{self, Removal},
    lanes::Lanes,
    payloads::SharedPayloads,
    sign::Signer,
};
use crate::{
    base::{callback_url::Guard, sources::SourceTable},
    config::DeliveryConfig,
    fleet::lease::Fence,
    hooks::HookStore,
    metrics::Metrics,
    plugin_host::Plugins,
    store_conn::StoreConn,
};

/// What every worker shares. Built once by [`DeliveryContext::new`]; its parts are delivery's
/// own.
pub struct DeliveryContext {
    /// The threads workers run on, with their HTTP clients.
    pub(super) lanes: Lanes,
    /// Marks delivered callbacks in Redis, off the hot path.
    pub(super) acker: Arc<Acker>,
    /// Keeps each hook's attempts and state for people, off the hot path.
    pub(super) insight: Arc<Insight>,
    pub(super) store: Arc<HookStore>,
    /// For the queues' Redis streams.
    pub(super) conn: StoreConn,
    pub(super) signer: Signer,
    /// The sources' names, for the queues' stored entries.
    pub(super) sources: Arc<SourceTable>,
    pub(super) retry_intervals_ms: Vec<u64>,
    /// Most entries queued per hook.
    pub(super) max_queue: usize,
    /// The bytes all queues may take in Redis together.
    pub(super) budget: Arc<Budget>,
    /// The callback URL policy (the client checks it again at every connection).
    pub(super) guard: Arc<Guard>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) token: CancellationToken,
    pub(super) tracker: TaskTracker,
    /// In a fleet: nothing is sent once the lease is lost.
    pub(super) fence: Fence,
    /// Payloads of shared records read back by the pagers.
    pub(super) paged: SharedPayloads,
    /// The plugin set in force, for the callbacks whose chain runs when they are sent.
    pub(super) plugins: Arc<Plugins>,
}

/// What the relay around delivery gives it: the hooks, the store, the metrics and the tasks'
/// lifetime.
pub struct Wiring {
    pub store: Arc<HookStore>,
    pub conn: StoreConn,
    /// The callback URL policy, checked again at every connection.
    pub guard: Arc<Guard>,
    pub metrics: Arc<Metrics>,
    pub token: CancellationToken,
    pub tracker: TaskTracker,
    /// What stops sending once the fleet's lease is lost (`Fence::none` when alone).
    pub fence: Fence,
    /// The plugins, hot reloaded: a callback waiting for them goes through the set in force
    /// when it is sent.
    pub plugins: Arc<Plugins>,
    /// Where the workers record their attempts.
    pub insight: Arc<Insight>,
}

impl DeliveryContext {
    /// The context for `config`'s bounds and timeouts, signing with `signer`, marking
    /// deliveries through `acker`, all queues within `budget_bytes`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(
        config: &DeliveryConfig,
        signer: Signer,
        acker: Arc<Acker>,
        budget_bytes: u64,
        wiring: Wiring,
    ) -> Result<Self, reqwest::Error> {
        let client = CallbackClient::new(
            Duration::from_millis(config.request_timeout_ms),
            wiring.guard.clone(),
            config.max_connections_per_receiver,
        )?;
        Ok(Self {
            lanes: Lanes::start(Lanes::per_core(), client, &wiring.token),
            acker,
            insight: wiring.insight,
            store: wiring.store,
            conn: wiring.conn,
            sources: signer.sources.clone(),
            signer,
            retry_intervals_ms: config.retry_intervals_ms.clone(),
            max_queue: config.max_queue,
            budget: Arc::new(Budget::new(budget_bytes)),
            guard: wiring.guard,
            metrics: wiring.metrics,
            token: wiring.token,
            tracker: wiring.tracker,
            fence: wiring.fence,
            paged: SharedPayloads::default(),
            plugins: wiring.plugins,
        })
    }

    /// The sources' names, as the queues' entries store them.
    pub fn sources(&self) -> &Arc<SourceTable> {
        &self.sources
    }

    /// The store connection, metrics and task lifetime delivery runs with, for the tasks that
    /// work beside it (the fleet's balancer).
    pub fn wiring(&self) -> (&StoreConn, &Arc<Metrics>, &CancellationToken, &TaskTracker) {
        (&self.conn, &self.metrics, &self.token, &self.tracker)
    }

    /// Counts and removes from Redis the oldest entries of `hook`'s queue `q` over its bound
    /// (`oldest`: the first one's event id and timestamp; `by_budget`: the budget of all queues
    /// took some, not only `max_queue`); the log says so once a minute per hook, with how many
    /// were dropped since its last line and the oldest event lost.
    pub(super) async fn drop_oldest(
        &self,
        q: &HookQueue,
        hook: HookId,
        dropped: &[Removal],
        oldest: (String, u64),
        by_budget: bool,
    ) {
        self.metrics.queue_dropped.inc_by(dropped.len() as u64);
        if by_budget {
            self.metrics
                .queue_dropped_by_budget
                .inc_by(dropped.len() as u64);
        }
        let line = q.note_drops(dropped.len() as u64, oldest);
        if let Some((count, (event, ts))) = line {
            let bound = if by_budget {
                "delivery.queue_budget_mb"
            } else {
                "delivery.max_queue"
            };
            tracing::warn!(
                hook_id = hook.0,
                dropped = count,
                oldest_lost_event = %event,
                oldest_lost_timestamp = ts,
                bound,
                max_queue = self.max_queue,
                budget_bytes = self.budget.limit(),
                queued_bytes = self.budget.used(),
                "queue full: dropped the oldest callbacks (one line a minute per hook while it goes on)"
            );
        }
        if let Err(e) = journal::remove(&mut self.conn.clone(), hook, dropped).await {
            tracing::warn!(hook_id = hook.0, error = %e, "cannot remove dropped callbacks from Redis");
        }
    }
}

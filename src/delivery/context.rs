//! What every hook's worker and pager share: the HTTP client, the store, the signer, the
//! bounds, the payloads read back; and what they do alike when a bound drops callbacks. The
//! bottom of delivery: it uses only the queue and Redis layout below it.

use crate::base::ids::HookId;

use std::sync::Arc;

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ack::Acker,
    budget::Budget,
    client::CallbackClient,
    hook_queue::HookQueue,
    journal::{self, Removal},
    payloads::SharedPayloads,
    sign::Signer,
};
use crate::{
    base::{callback_url::Guard, sources::SourceTable},
    fleet::lease::Fence,
    hooks::HookStore,
    metrics::Metrics,
    store_conn::StoreConn,
};

/// What every worker shares.
pub struct DeliveryContext {
    pub client: CallbackClient,
    /// Marks delivered callbacks in Redis, off the hot path.
    pub acker: Arc<Acker>,
    pub store: Arc<HookStore>,
    /// For the queues' Redis streams.
    pub conn: StoreConn,
    pub signer: Signer,
    /// The sources' names, for the queues' stored entries.
    pub sources: Arc<SourceTable>,
    pub retry_intervals_ms: Vec<u64>,
    /// Most entries queued per hook.
    pub max_queue: usize,
    /// The bytes all queues may take in Redis together.
    pub budget: Arc<Budget>,
    pub guard: Arc<Guard>,
    pub metrics: Arc<Metrics>,
    pub token: CancellationToken,
    pub tracker: TaskTracker,
    /// In a fleet: nothing is sent once the lease is lost.
    pub fence: Fence,
    /// Payloads of shared records read back by the pagers.
    pub paged: SharedPayloads,
}

impl DeliveryContext {
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

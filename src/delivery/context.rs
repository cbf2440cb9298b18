//! What every hook's worker and pager share, in four parts with private fields, so that a
//! function's signature says which it depends on: [`Sending`] (how a callback goes out),
//! [`Books`] (what is written down about it), [`Control`] (whether a hook may still send) and
//! [`QueueStore`] (where the queues live and what bounds them); and what they do alike when a
//! bound drops callbacks. The bottom of delivery: it uses only the queue and Redis layout
//! below it.

use crate::base::ids::HookId;

use std::{sync::Arc, time::Duration};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ack::Acker,
    budget::{Account, Budget},
    client::{CallbackClient, Circuits},
    hook_queue::HookQueue,
    insight::Insight,
    journal::{self, Removal},
    lanes::Lanes,
    payloads::SharedPayloads,
    retry::RetryPolicy,
    sign::Signer,
};
use crate::{
    audit::Audit,
    base::{callback_url::Guard, sources::SourceTable},
    config::{DeliveryConfig, OnGiveUp},
    fleet::Fence,
    hooks::HookStore,
    metrics::Metrics,
    plugin_host::Plugins,
    shutdown::retry_until_ok,
    store_conn::StoreConn,
};

/// What every worker and pager share. Built once by [`DeliveryContext::new`].
pub(crate) struct DeliveryContext {
    sending: Sending,
    books: Books,
    control: Control,
    queues: QueueStore,
}

/// How a callback goes out: the lanes (threads, each with its HTTP connections), the signer,
/// the callback URL policy, the retry schedule, and the plugins a deferred callback goes
/// through first.
pub(crate) struct Sending {
    lanes: Lanes,
    signer: Signer,
    guard: Arc<Guard>,
    retry_intervals_ms: Vec<u64>,
    /// `delivery.max_retry_after_s`.
    max_retry_after: Duration,
    /// `delivery.on_give_up`.
    on_give_up: OnGiveUp,
    /// `delivery.failing_after`.
    failing_after: usize,
    plugins: Arc<Plugins>,
    /// The tracer, while traces are on.
    traces: Option<Arc<crate::traces::Traces>>,
    /// `delivery.traceparent`: callbacks carry their attempt's `traceparent`.
    traceparent: bool,
}

impl Sending {
    /// The tracer, while traces are on.
    pub(crate) fn traces(&self) -> Option<&crate::traces::Traces> {
        self.traces.as_deref()
    }

    /// Whether callbacks carry their attempt's `traceparent` header.
    pub(crate) fn traceparent(&self) -> bool {
        self.traceparent
    }

    /// The threads workers run on, with their HTTP clients.
    pub(crate) fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    pub(crate) fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The callback URL policy (the client checks it again at every connection).
    pub(crate) fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The retry schedule of a hook (`permanent`: never given up).
    pub(crate) fn retry_policy(&self, permanent: bool) -> RetryPolicy {
        RetryPolicy::new(&self.retry_intervals_ms, permanent)
            .with_max_retry_after(self.max_retry_after)
    }

    /// After how many failed attempts in a row a hook is `hook-failing`.
    pub(crate) fn failing_after(&self) -> usize {
        self.failing_after
    }

    /// What becomes of a hook whose schedule ran out.
    pub(crate) fn on_give_up(&self) -> OnGiveUp {
        self.on_give_up
    }

    /// The plugin set in force, for the callbacks whose chain runs when they are sent.
    pub(crate) fn plugins(&self) -> &Plugins {
        &self.plugins
    }
}

/// What is written down about deliveries: delivered callbacks marked in Redis, each hook's
/// attempts and state for people, the metrics, the audit of what the relay did to hooks.
pub(crate) struct Books {
    acker: Arc<Acker>,
    insight: Arc<Insight>,
    metrics: Arc<Metrics>,
    audit: Audit,
}

impl Books {
    /// Marks delivered callbacks in Redis, off the hot path.
    pub(crate) fn acker(&self) -> &Arc<Acker> {
        &self.acker
    }

    /// Keeps each hook's attempts and state for people, off the hot path.
    pub(crate) fn insight(&self) -> &Arc<Insight> {
        &self.insight
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Where the hooks the relay disables or removes are recorded.
    pub(crate) fn audit(&self) -> &Audit {
        &self.audit
    }
}

/// Whether a hook may still send, and the tasks' lifetime: the hooks, the fleet's fence, the
/// relay's cancellation and its task tracker.
pub(crate) struct Control {
    store: Arc<HookStore>,
    fence: Fence,
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Control {
    /// The one check before every attempt and before giving a hook up: the relay is not
    /// stopping, the hook still exists, this instance (in a fleet) still holds its lease, and
    /// the queue (in a spread fleet, under its delivery lease) is still this worker's.
    pub(crate) fn may_send(&self, hook: HookId, queue: &HookQueue) -> bool {
        !self.token.is_cancelled()
            && self.store.registry().contains(hook)
            && self.fence.check_or_stop().is_ok()
            && queue.may_send()
    }

    pub(crate) fn store(&self) -> &HookStore {
        &self.store
    }

    /// Cancelled when the relay stops.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The relay's tasks, waited for at its stop.
    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }
}

/// Where the queues live and what bounds them: the store connection, the byte budget of all
/// queues, the shared payloads read back, the sources' names their entries store, and the
/// most entries one hook may have queued.
pub(crate) struct QueueStore {
    conn: StoreConn,
    budget: Arc<Budget>,
    paged: SharedPayloads,
    sources: Arc<SourceTable>,
    max_queue: usize,
}

impl QueueStore {
    /// For the queues' Redis streams.
    pub(crate) fn conn(&self) -> &StoreConn {
        &self.conn
    }

    /// The bytes all queues may take in Redis together.
    pub(crate) fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// `hook`'s account within the budget: its queue's share is fair by tenant first.
    pub(crate) fn account(&self, hook: &crate::hooks::Hook) -> Account {
        Account::of(&self.budget, hook.tenant.as_deref())
    }

    /// Payloads of shared records read back by the pagers.
    pub(crate) fn paged(&self) -> &SharedPayloads {
        &self.paged
    }

    /// The sources' names, as the queues' entries store them.
    pub(crate) fn sources(&self) -> &Arc<SourceTable> {
        &self.sources
    }

    /// Most entries queued per hook.
    pub(crate) fn max_queue(&self) -> usize {
        self.max_queue
    }
}

/// What the relay around delivery gives it: the hooks, the store, the metrics and the tasks'
/// lifetime.
pub(crate) struct Wiring {
    pub(crate) store: Arc<HookStore>,
    pub(crate) conn: StoreConn,
    /// The callback URL policy, checked again at every connection.
    pub(crate) guard: Arc<Guard>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) token: CancellationToken,
    pub(crate) tracker: TaskTracker,
    /// What stops sending once the fleet's lease is lost (`Fence::none` when alone).
    pub(crate) fence: Fence,
    /// The plugins, hot reloaded: a callback waiting for them goes through the set in force
    /// when it is sent.
    pub(crate) plugins: Arc<Plugins>,
    /// Where the workers record their attempts.
    pub(crate) insight: Arc<Insight>,
    /// The receivers' circuits (`delivery.circuit_after`; `None`: off).
    pub(crate) circuits: Option<Arc<Circuits>>,
    /// Where the hooks the relay disables or removes are recorded.
    pub(crate) audit: Audit,
    /// The tracer, while traces are on: each attempt's span.
    pub(crate) traces: Option<Arc<crate::traces::Traces>>,
}

impl DeliveryContext {
    /// The context for `config`'s bounds and timeouts, signing with `signer`, marking
    /// deliveries through `acker`, all queues within `budget_bytes`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub(crate) fn new(
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
        )?
        .with_receivers(&config.receivers, &wiring.metrics)
        .with_circuits(wiring.circuits.clone());
        Ok(Self {
            queues: QueueStore {
                conn: wiring.conn,
                budget: Arc::new(Budget::new(budget_bytes)),
                paged: SharedPayloads::default(),
                sources: signer.sources().clone(),
                max_queue: config.max_queue,
            },
            sending: Sending {
                lanes: Lanes::start(Lanes::per_core(), client, &wiring.token),
                signer,
                guard: wiring.guard,
                retry_intervals_ms: config.retry_intervals_ms.clone(),
                max_retry_after: Duration::from_secs(config.max_retry_after_s),
                on_give_up: config.on_give_up,
                failing_after: config.failing_after.max(1) as usize,
                plugins: wiring.plugins,
                traces: wiring.traces,
                traceparent: config.traceparent,
            },
            books: Books {
                acker,
                insight: wiring.insight,
                metrics: wiring.metrics,
                audit: wiring.audit,
            },
            control: Control {
                store: wiring.store,
                fence: wiring.fence,
                token: wiring.token,
                tracker: wiring.tracker,
            },
        })
    }

    /// How callbacks go out.
    pub(crate) fn sending(&self) -> &Sending {
        &self.sending
    }

    /// What is written down about deliveries.
    pub(crate) fn books(&self) -> &Books {
        &self.books
    }

    /// Whether a hook may still send; the tasks' lifetime.
    pub(crate) fn control(&self) -> &Control {
        &self.control
    }

    /// Where the queues live and what bounds them.
    pub(crate) fn queues(&self) -> &QueueStore {
        &self.queues
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
        let metrics = &self.books.metrics;
        metrics.queue_dropped.inc_by(dropped.len() as u64);
        if by_budget {
            metrics.queue_dropped_by_budget.inc_by(dropped.len() as u64);
        }
        let line = q.note_drops(dropped.len() as u64, oldest);
        if let Some((count, (event, ts))) = line {
            let bound = if by_budget {
                "delivery.queue_budget_mb"
            } else {
                "delivery.max_queue"
            };
            let queues = &self.queues;
            tracing::warn!(
                hook_id = hook.0,
                dropped = count,
                oldest_lost_event = %event,
                oldest_lost_timestamp = ts,
                bound,
                max_queue = queues.max_queue,
                budget_bytes = queues.budget.limit(),
                queued_bytes = queues.budget.used(),
                "queue full: dropped the oldest callbacks (one line a minute per hook while it goes on)"
            );
        }
        // Until the removal is written the worker marks nothing delivered: its cursor must
        // not pass these entries while they are in the stream.
        let token = self.control.token();
        let _ = retry_until_ok(token, "remove dropped callbacks", || {
            let mut conn = self.queues.conn.clone();
            async move { journal::remove(&mut conn, hook, dropped).await }
        })
        .await;
        q.removal_done();
    }
}

//! Per-hook queues: every (event, hook) pair becomes an [`Entry`], written to the hook's Redis
//! stream ([`super::journal`]) before it is queued in memory. One worker per hook sends the
//! entries one at a time, in order, retrying a failed callback (same body, same timestamp) while
//! the later ones wait; a 2xx removes the entry from Redis; when the schedule runs out the hook is
//! removed. Queues are bounded: the oldest entries are dropped (and counted) when a hook falls
//! too far behind. A slow hook only ever delays itself.

use std::{collections::HashMap, sync::Arc, time::Instant};

use crate::store_conn::StoreConn;
use bytes::Bytes;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ack::Acker,
    backlog::{self, SharedPayloads},
    client::CallbackClient,
    client::DeliveryError,
    hook_queue::HookQueue,
    journal::{self, Entry, Record, Removal},
    retry::RetryPolicy,
    sign::{SignedCallback, Signer},
};
use crate::{
    base::{callback_url::Guard, sources::SourceTable},
    fleet::lease::Fence,
    hooks::{Hook, HookStore},
    metrics::{Metrics, ReasonLabel},
    route::Callback,
    shutdown::retry_until_ok,
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
    pub guard: Arc<Guard>,
    pub metrics: Arc<Metrics>,
    pub token: CancellationToken,
    pub tracker: TaskTracker,
    /// In a fleet: nothing is sent once the lease is lost.
    pub fence: Fence,
}

/// Owns every hook's queue; used by the pipeline's single processing task only.
pub struct Dispatcher {
    ctx: Arc<DeliveryContext>,
    queues: HashMap<u64, Arc<HookQueue>>,
    /// The last shared payload reference given.
    last_shared: u64,
    /// Payloads read back by the pagers.
    paged: Arc<SharedPayloads>,
}

impl Dispatcher {
    pub fn new(ctx: Arc<DeliveryContext>) -> Self {
        Self {
            ctx,
            queues: HashMap::new(),
            last_shared: 0,
            paged: Arc::default(),
        }
    }

    /// Makes later shared payload references exceed `last` (the last one ever written).
    pub fn observe_shared(&mut self, last: u64) {
        self.last_shared = self.last_shared.max(last);
    }

    /// A new shared payload reference: the wall clock in microseconds, or one more than the
    /// last one.
    fn next_shared(&mut self) -> u64 {
        self.last_shared = crate::base::time::now_us().max(self.last_shared + 1);
        self.last_shared
    }

    /// Starts hook `hook`'s worker on the `count` entries its stream holds up to `until` (read
    /// a page at a time, before anything fresh).
    pub fn recover(&mut self, hook: &Arc<Hook>, until: u64, count: usize) {
        let q = self.start_worker(hook, HookQueue::stored(until, count));
        self.start_pager(hook.id, &q);
        self.queues.insert(hook.id, q);
    }

    /// Starts the worker of `hook` on `queue`.
    fn start_worker(&self, hook: &Arc<Hook>, queue: HookQueue) -> Arc<HookQueue> {
        let q = Arc::new(queue);
        self.ctx
            .tracker
            .spawn(worker(hook.clone(), q.clone(), self.ctx.clone()));
        q
    }

    fn start_pager(&self, hook: u64, q: &Arc<HookQueue>) {
        self.ctx.tracker.spawn(backlog::page_in(
            self.ctx.clone(),
            hook,
            q.clone(),
            self.paged.clone(),
        ));
    }

    /// Persists `state` (commands that must be exactly as durable as these callbacks: the
    /// batch's id mapping changes) and a batch of callbacks in one pipeline, then queues the
    /// callbacks. Waits (retrying) while Redis is down; `false` when the relay stopped first
    /// (the batch is then not queued).
    /// `arrivals[i]` is when the batch's message `i` came off the bus.
    pub async fn accept(
        &mut self,
        state: redis::Pipeline,
        callbacks: Vec<Callback>,
        arrivals: &[Instant],
    ) -> bool {
        if callbacks.is_empty() && state.is_empty() {
            return true;
        }
        // A payload that several callbacks carry is stored once, as a shared record.
        // Keyed by the payload's address (a callback's payload is shared by `Arc`).
        let mut uses: HashMap<usize, (usize, Option<u64>)> = HashMap::new();
        for c in &callbacks {
            uses.entry(Arc::as_ptr(&c.payload) as usize).or_default().0 += 1;
        }
        let mut records: Vec<(u64, Arc<crate::event::Payload>, usize)> = Vec::new();
        // One event id text per event, shared by its callbacks.
        let mut event_id: Option<(usize, Arc<str>)> = None;
        let batch: Vec<(Arc<Hook>, Entry)> = callbacks
            .into_iter()
            .map(|c| {
                let shared = match uses.get_mut(&(Arc::as_ptr(&c.payload) as usize)) {
                    Some((n, s)) if *n > 1 => {
                        let n = *n;
                        Some(*s.get_or_insert_with(|| {
                            let r = self.next_shared();
                            records.push((r, c.payload.clone(), n));
                            r
                        }))
                    }
                    _ => None,
                };
                let entry = Entry {
                    ts: c.ts,
                    payload: c.payload,
                    event_id: match &event_id {
                        Some((e, id)) if *e == Arc::as_ptr(&c.event) as usize => id.clone(),
                        _ => {
                            let id: Arc<str> = c.event.id.as_str().into();
                            event_id = Some((Arc::as_ptr(&c.event) as usize, id.clone()));
                            id
                        }
                    },
                    arrived: arrivals.get(c.message).copied(),
                    shared,
                    source: c.event.source,
                };
                (c.hook, entry)
            })
            .collect();
        let ids: Vec<(u64, Entry)> = batch.iter().map(|(h, e)| (h.id, e.clone())).collect();
        let records: Vec<Record<'_>> = records
            .iter()
            .map(|(s, p, n)| Record {
                shared: *s,
                payload: p,
                refs: *n,
            })
            .collect();
        let mut conn = self.ctx.conn.clone();
        let what = format!("persist {} callbacks", ids.len());
        let persisted = retry_until_ok(&self.ctx.token, what, || {
            let mut c = conn.clone();
            let (state, ids, records) = (&state, &ids, &records);
            let sources = &self.ctx.sources;
            async move { journal::append(&mut c, state, records, ids, sources).await }
        })
        .await;
        let Some(conflicts) = persisted else {
            return false;
        };
        if let Some(&(hook_id, ts)) = conflicts.first() {
            let n = conflicts.len() as u64;
            self.ctx.metrics.queue_append_conflicts.inc_by(n);
            tracing::warn!(
                callbacks = n,
                hook_id,
                ts,
                "callbacks whose id is not above their queue's last one were not written again (a batch sent again after a lost reply, or a clock that went back); first one named"
            );
        }
        // A hook removed while this batch was processed has had its stream deleted; the
        // append made it again, so remove it once more.
        let snapshot = self.ctx.store.registry().load();
        let mut gone: Vec<u64> = batch
            .iter()
            .map(|(h, _)| h.id)
            .filter(|id| snapshot.get(*id).is_none())
            .collect();
        gone.dedup();
        for id in gone {
            if let Err(e) = journal::delete(&mut conn, id).await {
                tracing::warn!(hook_id = id, error = %e, "cannot remove a removed hook's queue");
            }
        }
        for (hook, entry) in batch {
            if snapshot.get(hook.id).is_some() {
                self.queue(&hook, entry);
            }
        }
        true
    }

    fn queue(&mut self, hook: &Arc<Hook>, entry: Entry) {
        let q = match self.queues.get(&hook.id) {
            Some(q) => q.clone(),
            None => {
                let q = self.start_worker(hook, HookQueue::default());
                self.queues.insert(hook.id, q.clone());
                q
            }
        };
        let pushed = q.push(entry, self.ctx.max_queue);
        if pushed.spilled {
            self.start_pager(hook.id, &q);
        }
        if !pushed.dropped.is_empty() {
            let dropped: Vec<Removal> = pushed.dropped.iter().map(|e| (e.ts, e.shared)).collect();
            let (ctx, id) = (self.ctx.clone(), hook.id);
            self.ctx
                .tracker
                .spawn(async move { drop_oldest(&ctx, id, &dropped).await });
        }
    }

    /// Closes the queues of hooks that no longer exist (their workers end), and returns how many callbacks each live hook has queued.
    pub fn prune(&mut self) -> Vec<(u64, usize)> {
        let snapshot = self.ctx.store.registry().load();
        self.queues.retain(|id, q| {
            let live = snapshot.get(*id).is_some();
            if !live {
                q.close();
            }
            live
        });

        self.queues.iter().map(|(id, q)| (*id, q.total())).collect()
    }
}

/// Counts, logs and removes from Redis the oldest entries of a queue over its bound.
pub(super) async fn drop_oldest(ctx: &DeliveryContext, hook: u64, dropped: &[Removal]) {
    ctx.metrics.queue_dropped.inc_by(dropped.len() as u64);
    tracing::warn!(
        hook_id = hook,
        dropped = dropped.len(),
        "queue full: dropped the oldest callbacks"
    );
    if let Err(e) = journal::remove(&mut ctx.conn.clone(), hook, dropped).await {
        tracing::warn!(hook_id = hook, error = %e, "cannot remove dropped callbacks from Redis");
    }
}

/// What became of one entry.
enum Outcome {
    Delivered,
    /// The schedule ran out: the hook has been removed.
    GaveUp,
    /// The relay is stopping or the hook is gone; the entry stays in Redis.
    Stopped,
}

/// Sends the hook's callbacks one at a time until the hook is removed or the relay stops.
async fn worker(hook: Arc<Hook>, queue: Arc<HookQueue>, ctx: Arc<DeliveryContext>) {
    /// Counts the worker in `hookrelay_delivery_workers` for as long as it lives.
    struct Alive(prometheus_client::metrics::gauge::Gauge);
    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    ctx.metrics.delivery_workers.inc();
    let _alive = Alive(ctx.metrics.delivery_workers.clone());
    let policy = RetryPolicy::new(&ctx.retry_intervals_ms, hook.permanent);
    // An IP address in the URL is checked once; host names at each connection.
    let blocked = ctx
        .guard
        .check_url(&hook.callback_url)
        .err()
        .map(|r| r.to_string());
    let mut acks = ctx.acker.worker(hook.id);
    loop {
        // At most max_unacked delivered callbacks may wait to be marked in Redis.
        if !acks.ready_for_next(&ctx.token).await {
            return;
        }
        let entry = loop {
            if queue.is_closed() {
                return;
            }
            if let Some(e) = queue.pop() {
                break e;
            }
            tokio::select! {
                () = queue.ready.notified() => {}
                () = ctx.token.cancelled() => return,
            }
        };
        if ctx.token.is_cancelled() || !ctx.store.registry().contains(hook.id) || !ctx.fence.holds()
        {
            return;
        }
        match deliver(&hook, &entry, &policy, blocked.as_deref(), &ctx).await {
            Outcome::Delivered => acks.delivered(entry.ts, entry.shared),
            Outcome::GaveUp | Outcome::Stopped => return,
        }
    }
}

/// Delivers one entry with retries.
async fn deliver(
    hook: &Hook,
    entry: &Entry,
    policy: &RetryPolicy,
    blocked: Option<&str>,
    ctx: &DeliveryContext,
) -> Outcome {
    let SignedCallback { url, body } = ctx.signer.sign(
        &hook.callback_url,
        entry.payload.form_encoded(),
        entry.ts,
        entry.source,
    );
    let domain = ctx.signer.sources.domain(entry.source);
    let bearer = ctx.signer.bearer();
    let body = Bytes::from(body);
    let mut failures = 0;
    loop {
        // An attempt under way is finished even when the relay is stopping (the request timeout
        // bounds it), so that a delivered callback is not sent again after a restart.
        let result = match blocked {
            Some(why) => Err(DeliveryError::Blocked(why.to_string())),
            None => {
                let standard = ctx.signer.standard_headers(hook.id, entry.ts, &body);
                let standard = standard.as_ref();
                let client = &ctx.client;
                client
                    .post(&url, body.clone(), bearer, standard, domain)
                    .await
            }
        };
        let err = match result {
            Ok(_) => {
                ctx.metrics.callbacks_delivered.inc();
                if let Some(arrived) = entry.arrived {
                    let seconds = arrived.elapsed().as_secs_f64();
                    ctx.metrics.callback_latency.0.observe(seconds);
                }
                return Outcome::Delivered;
            }
            Err(e) => e,
        };
        failures += 1;
        ctx.metrics
            .callback_failures
            .get_or_create(&ReasonLabel {
                reason: err.reason(),
            })
            .inc();
        let Some(wait) = policy.next_delay(failures).filter(|_| err.should_retry()) else {
            if !ctx.fence.holds() {
                return Outcome::Stopped;
            }
            tracing::warn!(hook_id = hook.id, failures, error = %err, "callbacks keep failing; removing the hook");
            ctx.metrics.hooks_removed.inc();
            if let Err(e) = ctx.store.remove_failed(hook.id).await {
                tracing::error!(hook_id = hook.id, error = %e, "could not remove the failed hook from Redis");
            }
            ctx.metrics.count_hooks(&ctx.store.registry().load());
            return Outcome::GaveUp;
        };
        tracing::debug!(hook_id = hook.id, event = %entry.event_id, failures, error = %err, retry_in_ms = wait.as_millis() as u64, "callback failed");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = ctx.token.cancelled() => return Outcome::Stopped,
        }
        if !ctx.store.registry().contains(hook.id) || !ctx.fence.holds() {
            return Outcome::Stopped;
        }
    }
}

//! Per-hook queues: every (event, hook) pair becomes an [`Entry`], written to the hook's Redis
//! stream ([`super::journal`]) before it is queued in memory. One worker per hook
//! ([`super::worker`]) sends the entries one at a time, in order; a 2xx removes the entry from
//! Redis. Queues are bounded: the oldest entries are dropped (and counted) when a hook falls
//! too far behind. A slow hook only ever delays itself.

use std::{collections::HashMap, sync::Arc, time::Instant};

use crate::store_conn::StoreConn;
use redis::AsyncCommands;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ack::Acker,
    backlog::{self, SharedPayloads},
    budget::{self, Budget},
    client::CallbackClient,
    held::Held,
    hook_queue::HookQueue,
    journal::{self, Entry, Record, Removal},
    sign::Signer,
};
use crate::{
    base::{callback_url::Guard, sources::SourceTable},
    fleet::{lease::Fence, share},
    hooks::{Hook, HookStore},
    metrics::Metrics,
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
    /// The bytes all queues may take in Redis together.
    pub budget: Arc<Budget>,
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
    /// With delivery spread over a fleet: the queues this instance delivers. The callbacks of
    /// every other hook are only written to Redis and announced to their deliverer.
    spread: Option<Arc<Held>>,
}

impl Dispatcher {
    pub fn new(ctx: Arc<DeliveryContext>) -> Self {
        Self {
            ctx,
            queues: HashMap::new(),
            last_shared: 0,
            paged: Arc::default(),
            spread: None,
        }
    }

    /// A dispatcher that queues in memory only the callbacks of the hooks in `held`.
    pub fn spread(held: Arc<Held>) -> Self {
        Self {
            ctx: held.ctx().clone(),
            queues: HashMap::new(),
            last_shared: 0,
            paged: held.paged().clone(),
            spread: Some(held),
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
    /// a page at a time, before anything fresh). With delivery spread, the holder of the
    /// hook's delivery lease does that instead.
    pub fn recover(&mut self, hook: &Arc<Hook>, until: u64, count: usize) {
        if self.spread.is_some() {
            return;
        }
        let q = self.start_worker(
            hook,
            HookQueue::stored(self.ctx.budget.clone(), until, count),
        );
        self.start_pager(hook.id, &q);
        self.queues.insert(hook.id, q);
    }

    /// Starts the worker of `hook` on `queue`.
    fn start_worker(&self, hook: &Arc<Hook>, queue: HookQueue) -> Arc<HookQueue> {
        let q = Arc::new(queue);
        spawn_worker(&self.ctx, hook, &q);
        q
    }

    fn start_pager(&self, hook: u64, q: &Arc<HookQueue>) {
        spawn_pager(&self.ctx, hook, q, &self.paged);
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
        // Keyed by the payload's address (a callback's payload is shared by `Arc`). Not on a
        // cluster: a record would sit in another slot than the entries that release it.
        let mut uses: HashMap<usize, (usize, Option<u64>)> = HashMap::new();
        if !self.ctx.conn.is_cluster() {
            for c in &callbacks {
                uses.entry(Arc::as_ptr(&c.payload) as usize).or_default().0 += 1;
            }
        }
        let mut records: Vec<(u64, Arc<crate::event::Payload>, usize)> = Vec::new();
        // One event id text per event, shared by its callbacks.
        let mut event_id: Option<(usize, Arc<str>)> = None;
        let batch: Vec<(Arc<Hook>, Entry, u64)> = callbacks
            .into_iter()
            .map(|c| {
                let (shared, sharers) = match uses.get_mut(&(Arc::as_ptr(&c.payload) as usize)) {
                    Some((n, s)) if *n > 1 => {
                        let n = *n;
                        let r = *s.get_or_insert_with(|| {
                            let r = self.next_shared();
                            records.push((r, c.payload.clone(), n));
                            r
                        });
                        (Some(r), Some(n))
                    }
                    _ => (None, None),
                };
                let cost = budget::cost(&c.payload, sharers);
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
                (c.hook, entry, cost)
            })
            .collect();
        let ids: Vec<(u64, Entry)> = batch.iter().map(|(h, e, _)| (h.id, e.clone())).collect();
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
            .map(|(h, _, _)| h.id)
            .filter(|id| snapshot.get(*id).is_none())
            .collect();
        gone.dedup();
        for id in gone {
            if let Err(e) = journal::delete(&mut conn, id).await {
                tracing::warn!(hook_id = id, error = %e, "cannot remove a removed hook's queue");
            }
        }
        let live = batch
            .into_iter()
            .filter(|(hook, _, _)| snapshot.get(hook.id).is_some());
        match self.spread.clone() {
            None => {
                for (hook, entry, cost) in live {
                    self.queue(&hook, entry, cost);
                }
            }
            Some(held) => self.hand_over(&held, live).await,
        }
        true
    }

    fn queue(&mut self, hook: &Arc<Hook>, entry: Entry, cost: u64) {
        let q = match self.queues.get(&hook.id) {
            Some(q) => q.clone(),
            None => {
                let q = self.start_worker(hook, HookQueue::new(self.ctx.budget.clone()));
                self.queues.insert(hook.id, q.clone());
                q
            }
        };
        self.push(hook.id, &q, entry, cost);
    }

    /// Queues `entry` (`cost` bytes in Redis) in `q`, starting a pager when a span begins and
    /// removing what the bounds drop.
    fn push(&self, hook: u64, q: &Arc<HookQueue>, entry: Entry, cost: u64) {
        let pushed = q.push(entry, cost, self.ctx.max_queue);
        if pushed.spilled {
            spawn_pager(&self.ctx, hook, q, &self.paged);
        }
        if let Some(first) = pushed.dropped.first() {
            let oldest = (first.event_id.to_string(), first.ts);
            let dropped: Vec<Removal> = pushed.dropped.iter().map(|e| (e.ts, e.shared)).collect();
            let (ctx, q, by_budget) = (self.ctx.clone(), q.clone(), pushed.by_budget);
            self.ctx.tracker.spawn(async move {
                drop_oldest(&ctx, &q, hook, &dropped, oldest, by_budget).await;
            });
        }
    }

    /// With delivery spread: queues the callbacks of the hooks this instance delivers, and
    /// announces the others' to whoever delivers them.
    async fn hand_over(&self, held: &Held, batch: impl Iterator<Item = (Arc<Hook>, Entry, u64)>) {
        let mut announce: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
        let queues = held.lock().await;
        for (hook, entry, cost) in batch {
            match queues.get(&hook.id) {
                Some(q) => self.push(hook.id, q, entry, cost),
                None => {
                    let a = announce.entry(hook.id).or_default();
                    *a = (a.0.max(entry.ts), a.1 + 1);
                }
            }
        }
        drop(queues);
        if announce.is_empty() {
            return;
        }
        let text = share::format_queued(announce.into_iter().map(|(id, (ts, n))| (id, ts, n)));
        let sent: redis::RedisResult<i64> = self
            .ctx
            .conn
            .clone()
            .publish(share::QUEUED_CHANNEL, text)
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cannot announce queued callbacks to the instances that deliver them: they read them at their next check");
        }
    }

    /// The budget of all queues.
    pub fn budget(&self) -> &Budget {
        &self.ctx.budget
    }

    /// A handle on the store (for housekeeping beside the queues).
    pub fn conn(&self) -> StoreConn {
        self.ctx.conn.clone()
    }

    /// Closes the queues of hooks that no longer exist (their workers end), and returns how many callbacks each live hook has queued.
    /// `None` with delivery spread: the queues' depths are then reported by whoever delivers.
    pub fn prune(&mut self) -> Option<Vec<(u64, usize)>> {
        if self.spread.is_some() {
            return None;
        }
        let snapshot = self.ctx.store.registry().load();
        self.queues.retain(|id, q| {
            let live = snapshot.get(*id).is_some();
            if !live {
                q.close();
            }
            live
        });

        Some(self.queues.iter().map(|(id, q)| (*id, q.total())).collect())
    }
}

/// Starts the worker of `hook` on `q`.
pub(super) fn spawn_worker(
    ctx: &Arc<DeliveryContext>,
    hook: &Arc<Hook>,
    q: &Arc<HookQueue>,
) -> tokio::task::JoinHandle<()> {
    ctx.tracker
        .spawn(super::worker::run(hook.clone(), q.clone(), ctx.clone()))
}

/// Starts the pager of `hook`'s queue `q`.
pub(super) fn spawn_pager(
    ctx: &Arc<DeliveryContext>,
    hook: u64,
    q: &Arc<HookQueue>,
    paged: &Arc<SharedPayloads>,
) {
    ctx.tracker.spawn(backlog::page_in(
        ctx.clone(),
        hook,
        q.clone(),
        paged.clone(),
    ));
}

/// Counts and removes from Redis the oldest entries of `hook`'s queue `q` over its bound
/// (`oldest`: the first one's event id and timestamp; `by_budget`: the budget of all queues
/// took some, not only `max_queue`); the log says so once a minute per hook, with how many
/// were dropped since its last line and the oldest event lost.
pub(super) async fn drop_oldest(
    ctx: &DeliveryContext,
    q: &HookQueue,
    hook: u64,
    dropped: &[Removal],
    oldest: (String, u64),
    by_budget: bool,
) {
    ctx.metrics.queue_dropped.inc_by(dropped.len() as u64);
    if by_budget {
        ctx.metrics
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
            hook_id = hook,
            dropped = count,
            oldest_lost_event = %event,
            oldest_lost_timestamp = ts,
            bound,
            max_queue = ctx.max_queue,
            budget_bytes = ctx.budget.limit(),
            queued_bytes = ctx.budget.used(),
            "queue full: dropped the oldest callbacks (one line a minute per hook while it goes on)"
        );
    }
    if let Err(e) = journal::remove(&mut ctx.conn.clone(), hook, dropped).await {
        tracing::warn!(hook_id = hook, error = %e, "cannot remove dropped callbacks from Redis");
    }
}

//! The dispatcher, the top of delivery: every (event, hook) pair becomes an [`Entry`], written
//! to the hook's Redis stream ([`super::journal`]) before it is queued in memory
//! ([`super::hook_queue`]), starting the hook's worker ([`super::worker`]) and, when part of
//! the queue waits in Redis only, its pager ([`super::pager`]). One worker per hook sends the
//! entries one at a time, in order; a 2xx removes the entry from Redis. Queues are bounded:
//! the oldest entries are dropped (and counted) when a hook falls too far behind. A slow hook
//! only ever delays itself.

use crate::base::ids::{HookId, RecordRef};

use std::{collections::HashMap, sync::Arc, time::Instant};

use redis::AsyncCommands;

use super::{
    budget::Budget,
    context::DeliveryContext,
    held::Held,
    hook_queue::HookQueue,
    journal::{self, Commit, Entry, Record, Removal},
    pager,
    plan::{Plan, plan},
    worker,
};
use crate::{
    fleet::spread, hooks::Hook, route::Callback, shutdown::retry_until_ok, store_conn::StoreConn,
};

/// Owns every hook's queue; used by the pipeline's single processing task only.
pub(crate) struct Dispatcher {
    ctx: Arc<DeliveryContext>,
    queues: HashMap<HookId, Arc<HookQueue>>,
    /// The last shared payload reference given.
    last_shared: RecordRef,
    /// With delivery spread over a fleet: the queues this instance delivers. The callbacks of
    /// every other hook are only written to Redis and announced to their deliverer.
    spread: Option<Arc<Held>>,
}

impl Dispatcher {
    pub(crate) fn new(ctx: Arc<DeliveryContext>) -> Self {
        Self {
            ctx,
            queues: HashMap::new(),
            last_shared: RecordRef(0),
            spread: None,
        }
    }

    /// A dispatcher that queues in memory only the callbacks of the hooks in `held`.
    pub(crate) fn spread(held: Arc<Held>) -> Self {
        Self {
            ctx: held.ctx().clone(),
            queues: HashMap::new(),
            last_shared: RecordRef(0),
            spread: Some(held),
        }
    }

    /// Makes later shared payload references exceed `last` (the last one ever written).
    pub(crate) fn observe_shared(&mut self, last: RecordRef) {
        self.last_shared = self.last_shared.max(last);
    }

    /// A new shared payload reference: the wall clock in microseconds, or one more than the
    /// last one.
    fn next_shared(&mut self) -> RecordRef {
        self.last_shared = RecordRef(crate::base::time::now_us().max(self.last_shared.0 + 1));
        self.last_shared
    }

    /// Starts hook `hook`'s worker on the entries waiting in its stream (`pos`: after its
    /// cursor, up to its last id; read a page at a time, before anything fresh). With
    /// delivery spread, the holder of the hook's delivery lease does that instead.
    pub(crate) fn recover(&mut self, hook: &Arc<Hook>, pos: journal::Position) {
        if self.spread.is_some() {
            return;
        }
        let q = self.start_worker(
            hook,
            HookQueue::stored(self.ctx.queues().account(hook), pos),
        );
        pager::spawn(&self.ctx, hook.id, &q);
        self.queues.insert(hook.id, q);
    }

    /// Starts the worker of `hook` on `queue`.
    fn start_worker(&self, hook: &Arc<Hook>, queue: HookQueue) -> Arc<HookQueue> {
        let q = Arc::new(queue);
        worker::spawn(&self.ctx, hook, &q);
        q
    }

    /// Persists `state` (commands that must be exactly as durable as these callbacks: the
    /// batch's id mapping changes), a batch of callbacks and `commit` (the fleet's cursors,
    /// never before the callbacks: [`journal::append`]), then queues the callbacks. Waits (retrying) while Redis is down; `false` when the relay stopped first
    /// (the batch is then not queued).
    /// `arrivals[i]` is when the batch's message `i` came off the bus.
    pub(crate) async fn accept(
        &mut self,
        state: redis::Pipeline,
        commit: Option<Commit>,
        callbacks: Vec<Callback>,
        arrivals: &[Instant],
    ) -> bool {
        if callbacks.is_empty() && state.is_empty() && commit.is_none() {
            return true;
        }
        let share = !self.ctx.queues().conn().is_cluster();
        let Plan { batch, records } = plan(callbacks, arrivals, share, || self.next_shared());
        let ids: Vec<(HookId, Entry)> = batch.iter().map(|(h, e, _)| (h.id, e.clone())).collect();
        let records: Vec<Record<'_>> = records
            .iter()
            .map(|g| Record {
                shared: g.shared,
                payloads: &g.payloads,
                refs: g.refs,
            })
            .collect();
        let mut conn = self.ctx.queues().conn().clone();
        let what = format!("persist {} callbacks", ids.len());
        let persisted = retry_until_ok(self.ctx.control().token(), what, || {
            let mut c = conn.clone();
            let (state, commit, ids, records) = (&state, commit.as_ref(), &ids, &records);
            let sources = self.ctx.queues().sources();
            async move { journal::append(&mut c, state, commit, records, ids, sources).await }
        })
        .await;
        let Some(conflicts) = persisted else {
            return false;
        };
        if let Some(&(hook_id, ts)) = conflicts.first() {
            let n = conflicts.len() as u64;
            self.ctx.books().metrics().queue_append_conflicts.inc_by(n);
            tracing::warn!(
                callbacks = n,
                hook_id = hook_id.0,
                ts = ts.0,
                "callbacks whose id is not above their queue's last one were not written again (a batch sent again after a lost reply, or a clock that went back); first one named"
            );
        }
        // A hook removed while this batch was processed has had its stream deleted; the
        // append made it again, so remove it once more.
        let snapshot = self.ctx.control().store().registry().load();
        let mut gone: Vec<HookId> = batch
            .iter()
            .map(|(h, _, _)| h.id)
            .filter(|id| snapshot.get(*id).is_none())
            .collect();
        gone.dedup();
        for id in gone {
            if let Err(e) = journal::delete(&mut conn, id).await {
                tracing::warn!(hook_id = id.0, error = %e, "cannot remove a removed hook's queue");
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
                let q = self.start_worker(hook, HookQueue::new(self.ctx.queues().account(hook)));
                self.queues.insert(hook.id, q.clone());
                q
            }
        };
        self.push(hook.id, &q, entry, cost);
    }

    /// Queues `entry` (`cost` bytes in Redis) in `q`, starting a pager when a span begins and
    /// removing what the bounds drop.
    fn push(&self, hook: HookId, q: &Arc<HookQueue>, entry: Entry, cost: u64) {
        let pushed = q.push(entry, cost, self.ctx.queues().max_queue());
        if pushed.spilled {
            pager::spawn(&self.ctx, hook, q);
        }
        if let Some(first) = pushed.dropped.first() {
            let oldest = (first.event_id.to_string(), first.ts);
            let dropped: Vec<Removal> = pushed.dropped.iter().map(Entry::removal).collect();
            let (ctx, q, by_budget) = (self.ctx.clone(), q.clone(), pushed.by_budget);
            self.ctx.control().tracker().spawn(async move {
                ctx.drop_oldest(&q, hook, &dropped, oldest, by_budget).await;
            });
        }
    }

    /// With delivery spread: queues the callbacks of the hooks this instance delivers, and
    /// announces the others' to whoever delivers them.
    async fn hand_over(&self, held: &Held, batch: impl Iterator<Item = (Arc<Hook>, Entry, u64)>) {
        let mut announce: std::collections::BTreeMap<HookId, (u64, usize)> = Default::default();
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
        let text = spread::format_queued(announce.into_iter().map(|(id, (ts, n))| (id, ts, n)));
        let sent: redis::RedisResult<i64> = self
            .ctx
            .queues()
            .conn()
            .clone()
            .publish(spread::QUEUED_CHANNEL, text)
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cannot announce queued callbacks to the instances that deliver them: they read them at their next check");
        }
    }

    /// The budget of all queues.
    pub(crate) fn budget(&self) -> &Budget {
        self.ctx.queues().budget()
    }

    /// Whether the store is a Redis Cluster.
    pub(crate) fn on_cluster(&self) -> bool {
        self.ctx.queues().conn().is_cluster()
    }

    /// A handle on the store (for housekeeping beside the queues).
    pub(crate) fn conn(&self) -> StoreConn {
        self.ctx.queues().conn().clone()
    }

    /// Closes the queues of hooks that no longer exist (their workers end), and returns how many callbacks each live hook has queued.
    /// `None` with delivery spread: the queues' depths are then reported by whoever delivers.
    pub(crate) fn prune(&mut self) -> Option<Vec<(HookId, usize)>> {
        if self.spread.is_some() {
            return None;
        }
        let snapshot = self.ctx.control().store().registry().load();
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

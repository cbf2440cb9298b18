//! Delivery spread over a fleet, wired ([`crate::fleet::spread`]): the balancer says this
//! instance is alive, renews its delivery leases, takes free ones while it holds fewer than
//! its share and gives up its extras (once their callback in flight is done and marked), and
//! starts and stops the queues they cover ([`Held`]); the listener extends those queues with
//! what the queue writer announces. Now and then, and at each (re)subscription, the queues'
//! ends are read from Redis, in case an announcement was missed.

use crate::base::ids::HookId;

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    delivery::{Acker, Held},
    fleet::{Lease, spread},
    hooks::Registry,
    metrics::Metrics,
    store_conn::StoreConn,
};

/// Every this many rounds, the queues' ends are read from Redis.
const CATCH_UP_EVERY: u32 = 8;
/// How long a stop or a given-up lease waits for delivered callbacks to be marked.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// A delivery lease of this instance.
struct Holding {
    lease: Lease,
    worker: JoinHandle<()>,
    /// Given up: its queue is closed; the lease goes once the worker has ended.
    leaving: bool,
}

pub(super) struct Balancer {
    instance: String,
    ttl: Duration,
    conn: StoreConn,
    held: Arc<Held>,
    registry: Arc<Registry>,
    acker: Arc<Acker>,
    metrics: Arc<Metrics>,
    token: CancellationToken,
    mine: HashMap<HookId, Holding>,
}

impl Balancer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        instance: String,
        ttl: Duration,
        conn: StoreConn,
        held: Arc<Held>,
        registry: Arc<Registry>,
        acker: Arc<Acker>,
        metrics: Arc<Metrics>,
        token: CancellationToken,
    ) -> Self {
        Self {
            instance,
            ttl,
            conn,
            held,
            registry,
            acker,
            metrics,
            token,
            mine: HashMap::new(),
        }
    }

    /// Balances every quarter lease until the relay stops; then gives every lease up once the
    /// workers have ended and what they delivered is marked.
    pub(super) async fn run(mut self) {
        let mut tick = tokio::time::interval(self.ttl / 4);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Round 0 would catch up on positions just read by the leases' takers: start at 1.
        let mut round: u32 = 1;
        loop {
            tokio::select! {
                () = self.token.cancelled() => break,
                _ = tick.tick() => {}
            }
            self.round(round.is_multiple_of(CATCH_UP_EVERY)).await;
            round = round.wrapping_add(1);
        }
        self.stop().await;
    }

    async fn round(&mut self, catch_up_now: bool) {
        let alive = match spread::heartbeat(&mut self.conn.clone(), &self.instance, self.ttl).await
        {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot tell the fleet this instance is alive");
                1
            }
        };
        self.metrics.fleet.instances.set(alive as i64);
        self.renew().await;
        self.let_go_of_removed().await;
        self.finish_leaving().await;
        self.balance(alive).await;
        if catch_up_now && let Err(e) = catch_up(&self.held, &self.conn).await {
            tracing::warn!(error = %e, "cannot read where the delivered queues end");
        }
        let depths = {
            let queues = self.held.lock().await;
            self.metrics.fleet.hooks_held.set(queues.len() as i64);
            Held::depths(&queues)
        };
        super::depths::report_queues(&self.metrics, &self.conn, &depths, &self.registry).await;
    }

    /// Renews every lease; those found another's or not renewed in time are stopped (their
    /// worker has stopped sending already). A lease that ran out here is not renewed even if
    /// the store still has it (an outage shorter than a lease): its worker stopped when it
    /// saw it run out, so it is lost, and runs out in the store for another to take.
    async fn renew(&mut self) {
        let lapsed: Vec<HookId> = self
            .mine
            .iter()
            .filter(|(_, h)| !h.lease.is_held())
            .map(|(id, _)| *id)
            .collect();
        // A lease found another's is no longer held; one not renewed in time neither.
        spread::renew_all(
            &self.conn,
            self.mine
                .iter()
                .filter(|(id, _)| !lapsed.contains(id))
                .map(|(_, h)| &h.lease),
        )
        .await;
        let lost: Vec<HookId> = self
            .mine
            .iter()
            .filter(|(id, h)| {
                lapsed.contains(id) || !h.lease.is_held() || (!h.leaving && h.worker.is_finished())
            })
            .map(|(id, _)| *id)
            .collect();
        if lost.is_empty() {
            return;
        }
        let mut queues = self.held.lock().await;
        for id in lost {
            Held::stop(&mut queues, id);
            if self.mine.remove(&id).is_some_and(|h| !h.leaving) {
                self.metrics.fleet.hook_leases_lost.inc();
                tracing::warn!(
                    hook_id = id.0,
                    "lost a hook's delivery lease: another instance sends its callbacks"
                );
            }
        }
    }

    /// Stops delivering hooks that are gone.
    async fn let_go_of_removed(&mut self) {
        let snapshot = self.registry.load();
        let gone: Vec<HookId> = self
            .mine
            .iter()
            .filter(|(id, h)| !h.leaving && snapshot.get(**id).is_none())
            .map(|(id, _)| *id)
            .collect();
        if !gone.is_empty() {
            self.leave(&gone).await;
        }
    }

    /// Closes the queues of `ids`; their leases go once their workers have ended.
    async fn leave(&mut self, ids: &[HookId]) {
        let mut queues = self.held.lock().await;
        for id in ids {
            Held::stop(&mut queues, *id);
            if let Some(h) = self.mine.get_mut(id) {
                h.leaving = true;
            }
        }
    }

    /// Gives up the leases left whose workers have ended, once what they delivered is marked.
    async fn finish_leaving(&mut self) {
        let done: Vec<HookId> = self
            .mine
            .iter()
            .filter(|(_, h)| h.leaving && h.worker.is_finished())
            .map(|(id, _)| *id)
            .collect();
        if done.is_empty() {
            return;
        }
        let _ = tokio::time::timeout(FLUSH_WAIT, self.acker.flushed()).await;
        for id in done {
            if let Some(h) = self.mine.remove(&id) {
                if let Err(e) = h.lease.release(&mut self.conn.clone()).await {
                    tracing::debug!(hook_id = id.0, error = %e, "cannot give a delivery lease up: it runs out");
                }
                self.metrics.fleet.hook_leases_released.inc();
            }
        }
    }

    /// Aims at this instance's share of the hooks: gives up the extras, or takes free leases.
    async fn balance(&mut self, alive: usize) {
        let snapshot = self.registry.load();
        let target = spread::target(snapshot.len(), alive);
        let mut active: Vec<HookId> = self
            .mine
            .iter()
            .filter(|(_, h)| !h.leaving)
            .map(|(id, _)| *id)
            .collect();
        if active.len() > target {
            active.sort_unstable();
            let extra = active.split_off(target);
            tracing::info!(
                hooks = extra.len(),
                target,
                "giving up delivery leases to balance the fleet"
            );
            self.leave(&extra).await;
            return;
        }
        // While some are being given up, take none (an instance that just joined takes them).
        if active.len() == target || self.mine.len() > active.len() {
            return;
        }
        let mut candidates: Vec<HookId> = snapshot
            .all()
            .map(|h| h.id)
            .filter(|id| !self.mine.contains_key(id))
            .collect();
        let free = match free_of(&self.conn, &candidates).await {
            Ok(free) => free,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read which delivery leases are free");
                return;
            }
        };
        candidates.retain(|id| free.contains(id));
        // Instances start their search at different places, so that they rarely race.
        if !candidates.is_empty() {
            let start = fxhash(&self.instance) % candidates.len();
            candidates.rotate_left(start);
        }
        let mut want = target - active.len();
        for chunk in candidates.chunks(want.max(1)) {
            if want == 0 {
                break;
            }
            let chunk = &chunk[..chunk.len().min(want)];
            let taken = spread::take(&self.conn, chunk, &self.instance, self.ttl).await;
            want -= taken.len();
            self.start(taken).await;
        }
    }

    /// Starts delivering the hooks whose leases were just taken, from where their streams end
    /// (read with the queues locked, so that the writer waits meanwhile).
    async fn start(&mut self, taken: Vec<(HookId, Lease)>) {
        if taken.is_empty() {
            return;
        }
        let snapshot = self.registry.load();
        let mut queues = self.held.lock().await;
        let ids = taken.iter().map(|(id, _)| *id).collect();
        let positions = match super::recover::queue_positions(&self.conn, ids).await {
            Ok(p) => p.into_iter().collect::<HashMap<_, _>>(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the queues of hooks just taken; their leases are given up");
                HashMap::new()
            }
        };
        for (id, lease) in taken {
            let (Some(hook), Some(pos)) = (snapshot.get(id), positions.get(&id)) else {
                let _ = lease.release(&mut self.conn.clone()).await;
                continue;
            };
            let worker = self.held.start(&mut queues, hook, lease.clone(), *pos);
            self.metrics.fleet.hook_leases_taken.inc();
            tracing::debug!(
                hook_id = id.0,
                queued = pos.length,
                "took a hook's delivery lease"
            );
            let leaving = false;
            self.mine.insert(
                id,
                Holding {
                    lease,
                    worker,
                    leaving,
                },
            );
        }
    }

    /// At a stop: once the workers have ended and what they delivered is marked, gives every
    /// lease up and leaves the fleet, so that the others take the hooks at once.
    async fn stop(mut self) {
        for h in self.mine.values_mut() {
            let _ = (&mut h.worker).await;
        }
        let _ = tokio::time::timeout(FLUSH_WAIT, self.acker.flushed()).await;
        let conn = self.conn.clone();
        futures_util::future::join_all(self.mine.values().map(|h| {
            let mut c = conn.clone();
            async move { h.lease.release(&mut c).await }
        }))
        .await;
        if let Err(e) = spread::leave(&mut conn.clone(), &self.instance).await {
            tracing::debug!(error = %e, "cannot tell the fleet this instance leaves");
        }
    }
}

/// Which of `ids` have no delivery lease holder.
async fn free_of(
    conn: &StoreConn,
    ids: &[HookId],
) -> redis::RedisResult<std::collections::HashSet<HookId>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.exists(spread::lease_key(*id));
    }
    let held: Vec<bool> = pipe.query_async(&mut conn.clone()).await?;
    Ok(ids
        .iter()
        .zip(held)
        .filter(|(_, h)| !h)
        .map(|(id, _)| *id)
        .collect())
}

/// A small stable hash of a name (FNV-1a).
fn fxhash(name: &str) -> usize {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    usize::try_from(h % (u32::MAX as u64)).unwrap_or(0)
}

/// Reads where each delivered queue ends in Redis and extends the queue to there.
///
/// # Errors
/// When Redis fails.
pub(super) async fn catch_up(held: &Held, conn: &StoreConn) -> redis::RedisResult<()> {
    let ids: Vec<HookId> = held.lock().await.keys().copied().collect();
    let positions = super::recover::queue_positions(conn, ids).await?;
    let queues = held.lock().await;
    for (id, pos) in positions {
        held.extend(&queues, id, pos.last_ts, 0);
    }
    Ok(())
}

/// Extends the delivered queues with what the queue writer announces, until the relay stops.
pub(super) async fn listen(held: Arc<Held>, conn: StoreConn, token: CancellationToken) {
    conn.keep_listening("queued callbacks of other instances", &token, |client| {
        let (held, conn, token) = (held.clone(), conn.clone(), token.clone());
        async move {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(spread::QUEUED_CHANNEL).await?;
            // Whatever was announced while not subscribed.
            catch_up(&held, &conn).await?;
            let mut messages = pubsub.into_on_message();
            while let Some(text) = StoreConn::next_message(&mut messages, &token).await? {
                let queues = held.lock().await;
                for (id, ts, n) in spread::parse_queued(&text) {
                    held.extend(&queues, id, ts, n);
                }
            }
            Ok(())
        }
    })
    .await;
}

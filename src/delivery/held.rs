//! The queues of the hooks this instance delivers when delivery is spread over a fleet. The
//! balancer starts and stops them as it takes and gives up delivery leases; the dispatcher of
//! the instance that writes the queues pushes into them; announcements of what another
//! instance wrote extend them. One lock orders the three: a queue is started with the
//! position read under it, so every entry written after is either pushed or announced to it,
//! and an entry it has already is not taken twice.

use crate::base::ids::HookId;

use std::{collections::HashMap, sync::Arc};

use tokio::{sync::MutexGuard, task::JoinHandle};

use super::{context::DeliveryContext, hook_queue::HookQueue, journal::Position, pager, worker};
use crate::{fleet::Lease, hooks::Hook};

/// The queues delivered here, by hook id.
pub(crate) type Queues = HashMap<HookId, Arc<HookQueue>>;

pub(crate) struct Held {
    ctx: Arc<DeliveryContext>,
    queues: tokio::sync::Mutex<Queues>,
}

impl Held {
    pub(crate) fn new(ctx: Arc<DeliveryContext>) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            queues: tokio::sync::Mutex::default(),
        })
    }

    pub(crate) fn ctx(&self) -> &Arc<DeliveryContext> {
        &self.ctx
    }

    pub(crate) async fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().await
    }

    /// Starts delivering `hook` under `lease`, from what its stream holds (`pos`, read with
    /// `queues` locked). Returns its worker.
    pub(crate) fn start(
        &self,
        queues: &mut Queues,
        hook: &Arc<Hook>,
        lease: Lease,
        pos: Position,
    ) -> JoinHandle<()> {
        let q = Arc::new(HookQueue::leased(
            self.ctx.queues().account(hook),
            lease,
            pos,
        ));
        let worker = worker::spawn(&self.ctx, hook, &q);
        if pos.length > 0 {
            pager::spawn(&self.ctx, hook.id, &q);
        }
        if let Some(old) = queues.insert(hook.id, q) {
            old.close();
        }
        worker
    }

    /// Stops delivering hook `id`: its worker ends once its callback in flight is done.
    pub(crate) fn stop(queues: &mut Queues, id: HookId) {
        if let Some(q) = queues.remove(&id) {
            q.close();
        }
    }

    /// Hook `id`'s stream now reaches `until` (about `count` entries were added): the entries
    /// its queue does not have yet are read from Redis.
    pub(crate) fn extend(&self, queues: &Queues, id: HookId, until: u64, count: usize) {
        if let Some(q) = queues.get(&id)
            && q.extend(until, count)
        {
            pager::spawn(&self.ctx, id, q);
        }
    }

    /// How many callbacks each delivered hook has queued.
    pub(crate) fn depths(queues: &Queues) -> Vec<(HookId, usize)> {
        queues.iter().map(|(id, q)| (*id, q.total())).collect()
    }
}

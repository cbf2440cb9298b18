//! The steps before processing, in the order the instance's mode gives ([`Mode::steps`]): the
//! queues of earlier versions moved, delivery spread started, the fleet lease taken (following
//! the holder until then), the hooks and the sources' state restored.

use std::sync::Arc;

use super::{
    balancer, follower,
    mode::Step,
    recover::{self, restore_hooks},
    sources::{self, Source},
    start::{Hooks, Start, Wired},
};
use crate::{
    delivery::{DeliveryContext, Dispatcher, Held},
    fleet::Lease,
    shutdown::retry_until_ok,
    store_conn::StoreConn,
};

/// What the steps before processing leave: the queues this instance delivers (delivery
/// spread), what a new holder queues first, the sources' processors read back.
pub(super) struct Stepped {
    pub(super) held: Option<Arc<Held>>,
    pub(super) first: follower::Resumed,
    pub(super) processors: Vec<crate::event::Processor>,
}

impl Start<'_> {
    /// The steps before processing, in the order the instance's mode gives ([`Mode::steps`]).
    pub(super) async fn steps(
        &self,
        sources: &[Source],
        conn: &StoreConn,
        hooks: &Hooks,
        wired: &mut Wired,
    ) -> Option<Stepped> {
        let (config, token, mode) = (self.config, self.token, &hooks.mode);
        let (mut held, mut first, mut processors) = (None, follower::Resumed::default(), None);
        for step in mode.steps() {
            match *step {
                Step::MoveLegacyQueues { as_writer } => {
                    let (instance, hook_lease) = (mode.instance(), mode.hook_lease());
                    recover::move_legacy_queues(conn, instance, as_writer, hook_lease, token)
                        .await?;
                }
                Step::StartSpread => {
                    held = mode.instance().map(|instance| {
                        let (delivery, acker) = (&wired.delivery, &wired.acker);
                        follower::spread(delivery, instance, &config.fleet, &hooks.registry, acker)
                    });
                }
                Step::TakeLease => {
                    if let Some(lease) = mode.lease() {
                        first = self.take_lease(lease, conn, wired).await?;
                    }
                }
                Step::RestoreHooks => {
                    if !restore_hooks(&hooks.store, config, self.metrics, token).await {
                        return None;
                    }
                }
                Step::RestoreState => {
                    processors = Some(sources::restore(sources, conn, config, token).await?);
                    let seeds = std::mem::take(&mut wired.subscribed.seeds);
                    let (metrics, tracker) = (self.metrics, self.tracker);
                    sources::seed_all(sources, &config.bbb, seeds, metrics, tracker, token);
                }
            }
        }
        Some(Stepped {
            held,
            first,
            processors: processors?,
        })
    }

    /// In a fleet: follows the holder (keeping messages) until this instance takes the lease,
    /// then holds it. Returns the kept messages to process first.
    async fn take_lease(
        &self,
        lease: &Lease,
        conn: &StoreConn,
        wired: &mut Wired,
    ) -> Option<follower::Resumed> {
        let follower = follower::Follower {
            lease,
            conn,
            config: &self.config.fleet,
            sources: wired.delivery.queues().sources(),
            subscriptions: std::mem::take(&mut wired.subscribed.fleet),
            metrics: self.metrics,
        };
        // `None`: stopped before taking the lease; what this instance delivers ends cleanly.
        let first = follower::follow(&mut wired.bus, follower, self.token).await?;
        self.metrics.fleet.holder.set(1);
        self.tracker.spawn(follower::hold(
            lease.clone(),
            conn.clone(),
            wired.lease_stop.clone(),
            self.token.clone(),
        ));
        Some(first)
    }

    /// The dispatcher: with delivery spread, on the queues this instance holds, once what the
    /// last writer wrote and announced is in them (its announcements may have been missed).
    pub(super) async fn dispatcher(
        &self,
        held: Option<Arc<Held>>,
        delivery: Arc<DeliveryContext>,
        conn: &StoreConn,
    ) -> Option<Dispatcher> {
        let Some(held) = held else {
            return Some(Dispatcher::new(delivery));
        };
        retry_until_ok(self.token, "read where the delivered queues end", || {
            balancer::catch_up(&held, conn)
        })
        .await?;
        Some(Dispatcher::spread(held))
    }
}

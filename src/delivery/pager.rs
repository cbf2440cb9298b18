//! The pager of one hook's queue: reads the part of the queue that is in Redis only (after a
//! restart, the whole stream; after a burst, what did not fit the window) [`PAGE`] entries at a
//! time whenever the worker runs low, while the bus goes on being processed. Shared payload
//! records are read once and shared in memory by every hook whose pages refer to them. The
//! queue's bounds (`delivery.max_queue`, its share of `delivery.queue_budget_mb`) are kept here
//! for what is in Redis only: the oldest entries beyond them are dropped (and counted) as they
//! are read.

use crate::base::ids::HookId;

use std::sync::Arc;

use super::{
    context::DeliveryContext,
    hook_queue::{HookQueue, PAGE},
    journal::{self, Entry, Removal},
    payloads::resolve,
};
use crate::shutdown::retry_until_ok;

/// Starts the pager of `hook`'s queue `q`.
pub(super) fn spawn(ctx: &Arc<DeliveryContext>, hook: HookId, q: &Arc<HookQueue>) {
    ctx.control()
        .tracker()
        .spawn(run(ctx.clone(), hook, q.clone()));
}

/// Pages hook `hook`'s span into `queue` until it is read whole, the queue closes or the relay
/// stops.
async fn run(ctx: Arc<DeliveryContext>, hook: HookId, queue: Arc<HookQueue>) {
    let token = ctx.control().token().clone();
    let queues = ctx.queues();
    loop {
        while !queue.wants_more() {
            if queue.is_closed() || queue.span().is_none() {
                return;
            }
            tokio::select! {
                () = queue.wants_page.notified() => {}
                () = token.cancelled() => return,
            }
        }
        let Some(span) = queue.span() else { return };
        let page = retry_until_ok(&token, "read a hook's queue", || {
            let mut c = queues.conn().clone();
            async move { journal::read_page(&mut c, hook, span.after, span.until, PAGE).await }
        })
        .await;
        let Some(mut page) = page else { return };
        let read = page.len();
        let last = page.last().map(|s| s.ts);
        let complete = (read < PAGE).then_some(span.until);
        let room = queue.make_room(read, queues.max_queue());
        let oldest = match (room.from_memory.first(), page.first()) {
            (Some(e), _) => Some((e.event_id.to_string(), e.ts)),
            (None, Some(s)) if room.from_page > 0 => Some((s.event_id.to_string(), s.ts)),
            _ => None,
        };
        if let Some(oldest) = oldest {
            let dropped: Vec<Removal> = room
                .from_memory
                .iter()
                .map(Entry::removal)
                .chain(page.drain(..room.from_page).map(|s| s.removal()))
                .collect();
            ctx.drop_oldest(&queue, hook, &dropped, oldest, room.by_budget)
                .await;
        }
        let entries = retry_until_ok(&token, "read queued payloads", || {
            resolve(
                queues.conn().clone(),
                hook,
                &page,
                queues.paged(),
                queues.sources(),
            )
        })
        .await;
        let Some(entries) = entries else { return };
        if !queue.add_page(entries, read, last, complete) {
            return;
        }
    }
}

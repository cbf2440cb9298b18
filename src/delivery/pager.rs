//! The pager of one hook's queue: reads the part of the queue that is in Redis only (after a
//! restart, the whole stream; after a burst, what did not fit the window) [`PAGE`] entries at a
//! time whenever the worker runs low, while the bus goes on being processed. Shared payload
//! records are read once and shared in memory by every hook whose pages refer to them. The
//! queue's bounds (`delivery.max_queue`, its share of `delivery.queue_budget_mb`) are kept here
//! for what is in Redis only: the oldest entries beyond them are dropped (and counted) as they
//! are read.

use crate::base::ids::{HookId, RecordRef};

use std::{collections::HashMap, sync::Arc};

use super::{
    context::DeliveryContext,
    hook_queue::{HookQueue, PAGE},
    journal::{self, Entry, Removal, Stored, StoredBody},
    payloads::SharedPayloads,
};
use crate::{
    base::sources::SourceTable, event::Payload, shutdown::retry_until_ok, store_conn::StoreConn,
};

/// Starts the pager of `hook`'s queue `q`.
pub(super) fn spawn(ctx: &Arc<DeliveryContext>, hook: HookId, q: &Arc<HookQueue>) {
    ctx.tracker.spawn(run(ctx.clone(), hook, q.clone()));
}

/// Pages hook `hook`'s span into `queue` until it is read whole, the queue closes or the relay
/// stops.
async fn run(ctx: Arc<DeliveryContext>, hook: HookId, queue: Arc<HookQueue>) {
    let token = ctx.token.clone();
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
            let mut c = ctx.conn.clone();
            async move { journal::read_page(&mut c, hook, span.after, span.until, PAGE).await }
        })
        .await;
        let Some(mut page) = page else { return };
        let read = page.len();
        let last = page.last().map(|s| s.ts);
        let complete = (read < PAGE).then_some(span.until);
        let room = queue.make_room(read, ctx.max_queue);
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
            resolve(ctx.conn.clone(), hook, &page, &ctx.paged, &ctx.sources)
        })
        .await;
        let Some(entries) = entries else { return };
        if !queue.add_page(entries, read, last, complete) {
            return;
        }
    }
}

/// Turns stored entries into queue entries, reading the shared records not in memory yet.
/// Entries whose payload is gone are removed from Redis (and logged).
async fn resolve(
    mut conn: StoreConn,
    hook: HookId,
    page: &[Stored],
    shared: &SharedPayloads,
    sources: &SourceTable,
) -> Result<Vec<Entry>, redis::RedisError> {
    // Payloads of this page, held from here on so that none can go in between.
    let mut held: HashMap<RecordRef, Arc<Payload>> = HashMap::new();
    let take_known = |held: &mut HashMap<RecordRef, Arc<Payload>>| {
        let mut missing = Vec::new();
        for s in page {
            if let StoredBody::Shared(r) = s.body
                && !held.contains_key(&r)
            {
                match shared.get(r) {
                    Some(p) => {
                        held.insert(r, p);
                    }
                    None => missing.push(r),
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        missing
    };
    if !take_known(&mut held).is_empty() {
        let _one = shared.reading.lock().await;
        // Another pager may have read some meanwhile.
        let missing = take_known(&mut held);
        let texts = journal::read_records(&mut conn, &missing).await?;
        for (r, text) in missing.iter().zip(texts) {
            if let Some(t) = text {
                let p = Arc::new(Payload::new(t));
                shared.insert(*r, &p);
                held.insert(*r, p);
            }
        }
    }
    let mut entries = Vec::with_capacity(page.len());
    let mut unusable = Vec::new();
    let mut unknown_source = None;
    for s in page {
        let (payload, shared_ref) = match &s.body {
            StoredBody::Inline(t) => (Arc::new(Payload::new(t.as_str())), None),
            StoredBody::Shared(r) => match held.get(r) {
                Some(p) => (p.clone(), Some(*r)),
                None => {
                    unusable.push(s.removal());
                    continue;
                }
            },
            StoredBody::Unreadable => {
                unusable.push(s.removal());
                continue;
            }
        };
        let source = sources.find_stored(s.source.as_deref()).unwrap_or_else(|| {
            unknown_source = s.source.clone();
            0
        });
        entries.push(Entry {
            ts: s.ts,
            payload,
            event_id: s.event_id.clone(),
            arrived: None,
            shared: shared_ref,
            source,
            chain: s.chain.clone(),
        });
    }
    if let Some(name) = unknown_source {
        tracing::warn!(
            hook_id = hook.0,
            source = name,
            "queued callbacks of a source no longer configured are sent with the first source's domain"
        );
    }
    if !unusable.is_empty() {
        tracing::warn!(
            hook_id = hook.0,
            callbacks = unusable.len(),
            "queued callbacks without a readable payload were removed"
        );
        journal::remove(&mut conn, hook, &unusable).await?;
    }
    Ok(entries)
}

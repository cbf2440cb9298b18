//! Giving a hook up when its retry schedule ran out: what its queue still holds (the callback
//! that failed first) is kept for `redeliver`, up to the bytes kept per URL, and the hook is
//! removed (its queue goes with it).

use super::{
    client::DeliveryError,
    context::DeliveryContext,
    hook_queue::PAGE,
    journal::{self, Entry},
    payloads::resolve,
};
use crate::hooks::Hook;

/// Removes `hook`, whose callback `failed` failed `failures` times (the last with `error`),
/// keeping what it leaves queued.
pub async fn give_up(
    ctx: &DeliveryContext,
    hook: &Hook,
    failed: &Entry,
    failures: usize,
    error: &DeliveryError,
) {
    tracing::warn!(hook_id = hook.id.0, failures, error = %error, "callbacks keep failing; removing the hook");
    keep_abandoned(ctx, hook, failed).await;
    let (books, store) = (ctx.books(), ctx.control().store());
    books.metrics().hooks_removed.inc();
    books.insight().removed(hook.id, &hook.callback_url);
    if let Err(e) = store.remove_failed(hook.id).await {
        tracing::error!(hook_id = hook.id.0, error = %e, "could not remove the failed hook from Redis");
    }
    let hooks = store.registry().load();
    books.metrics().count_hooks(hooks.len(), hooks.counts());
}

/// Keeps what a hook removed after failures leaves queued, the callback that failed first,
/// for `redeliver` (up to the bytes kept per URL): the queue goes with the hook.
async fn keep_abandoned(ctx: &DeliveryContext, hook: &Hook, failed: &Entry) {
    let insight = ctx.books().insight();
    let Some(max_bytes) = insight.retained_bytes() else {
        return;
    };
    let queues = ctx.queues();
    let mut kept = vec![failed.clone()];
    let (mut after, mut bytes) = (failed.ts, 0u64);
    loop {
        let mut conn = queues.conn().clone();
        let page = journal::read_page(&mut conn, hook.id, Some(after), u64::MAX, PAGE).await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(hook_id = hook.id.0, error = %e, "cannot read the removed hook's queue: its callbacks are not kept for redelivery");
                break;
            }
        };
        let Some(last) = page.last().map(|s| s.ts) else {
            break;
        };
        after = last;
        match resolve(conn, hook.id, &page, queues.paged(), queues.sources()).await {
            Ok(entries) => {
                bytes += entries
                    .iter()
                    .map(|e| e.payload.text().len() as u64)
                    .sum::<u64>();
                kept.extend(entries);
            }
            Err(e) => {
                tracing::warn!(hook_id = hook.id.0, error = %e, "cannot read the removed hook's payloads: its callbacks are not kept for redelivery");
                break;
            }
        }
        if page.len() < PAGE || bytes > max_bytes {
            break;
        }
    }
    tracing::info!(
        hook_id = hook.id.0,
        callbacks = kept.len(),
        "the removed hook's undelivered callbacks are kept for redelivery"
    );
    insight.keep(&hook.callback_url, kept);
}

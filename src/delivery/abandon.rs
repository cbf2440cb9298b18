//! Giving a hook up when its retry schedule ran out: what its queue still holds (the callback
//! that failed first) is kept for `redeliver`, up to the bytes kept per URL, and the hook is
//! removed (its queue goes with it); or, with `delivery.on_give_up = "disable"`, the hook is
//! disabled, its queue kept, until it is enabled again ([`wait_enabled`]).

use super::{
    client::DeliveryError,
    context::DeliveryContext,
    hook_queue::PAGE,
    journal::{self, Entry},
    notices::{self, Notice},
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
    tell(ctx, "hook-removed", hook, failures, error).await;
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

/// Disables `hook`, whose callback failed `failures` times (the last with `error`): it stays
/// registered and keeps its queue. `false` when it could not be disabled (gone meanwhile, or
/// Redis failed: the worker then stops, and the next start tries again).
pub async fn disable(
    ctx: &DeliveryContext,
    hook: &Hook,
    failures: usize,
    error: &DeliveryError,
) -> bool {
    let (books, store) = (ctx.books(), ctx.control().store());
    match store.set_disabled(hook.id, true).await {
        Ok(_) => {
            tracing::warn!(hook_id = hook.id.0, failures, error = %error, "callbacks keep failing; the hook is disabled (hookrelay hooks enable, or a hooks/create of its URL, resumes it)");
            books.metrics().hooks_disabled.inc();
            tell(ctx, "hook-disabled", hook, failures, error).await;
            let hooks = store.registry().load();
            books.metrics().count_hooks(hooks.len(), hooks.counts());
            true
        }
        Err(e) => {
            tracing::error!(hook_id = hook.id.0, error = %e, "could not disable the failed hook");
            false
        }
    }
}

/// Tells event `id` about `hook` after `failures` failed attempts, the last with `error`.
pub async fn tell(
    ctx: &DeliveryContext,
    id: &str,
    hook: &Hook,
    failures: usize,
    error: &DeliveryError,
) {
    let notice = Notice::new(
        id,
        hook,
        failures,
        (error.status(), Some(error.to_string())),
    );
    notices::tell(ctx.queues().conn(), ctx.books().metrics(), &notice).await;
}

/// Waits while hook `id` is disabled: `true` once it is enabled, `false` when it is gone or
/// the worker must stop.
pub async fn wait_enabled(ctx: &DeliveryContext, id: crate::base::ids::HookId) -> bool {
    /// How often a disabled hook's worker looks whether it was enabled (here, or by another
    /// instance of a fleet, whose change reaches the registry).
    const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);
    let control = ctx.control();
    loop {
        match control.store().registry().is_disabled(id) {
            None => return false,
            Some(false) => return true,
            Some(true) => {}
        }
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = control.token().cancelled() => return false,
        }
    }
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
    insight.keep(&hook.registration().key(), kept);
}

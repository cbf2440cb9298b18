//! Giving a hook up when its retry schedule ran out: what its queue still holds (the callback
//! that failed first) is kept for `redeliver`, up to the bytes kept per URL, and the hook is
//! removed (its queue goes with it); or, with `delivery.on_give_up = "disable"`, the hook is
//! disabled, its queue kept, until it is enabled again ([`wait_enabled`]). A hook whose tenant
//! is gone is disabled too, and waits for it ([`wait_for_tenant`]).

use super::{
    client::DeliveryError,
    context::DeliveryContext,
    hook_queue::PAGE,
    journal::{self, Entry},
    judge::about,
    notices::{self, Notice},
    payloads::resolve,
    sign::UnknownTenant,
};
use crate::{
    audit::{Action, RELAY, Record},
    hooks::{DisabledReason, Hook},
    metrics::TenantReasonLabels,
};

/// Counts `action` (a removal or a disabling) the relay took on `hook` for `reason`, by tenant,
/// and records it in the audit.
async fn book(ctx: &DeliveryContext, action: Action, hook: &Hook, reason: DisabledReason) {
    let metrics = ctx.books().metrics();
    let counter = if action == Action::Remove {
        &metrics.hooks_removed
    } else {
        &metrics.hooks_disabled
    };
    counter
        .get_or_create(&TenantReasonLabels::of(
            hook.tenant.as_deref(),
            reason.as_str(),
        ))
        .inc();
    let record = record_of(ctx, action, hook, reason);
    ctx.books().audit().record(record).await;
}

/// An audit record of `action` the relay took on `hook`, for `reason`.
fn record_of(ctx: &DeliveryContext, action: Action, hook: &Hook, reason: DisabledReason) -> Record {
    let tenants = ctx.sending().signer().tenants();
    let name = hook.tenant.as_deref().map(|id| tenants.name_of(id));
    let tenant = hook.tenant.as_deref().zip(name.as_deref());
    Record::now(action, RELAY)
        .of_tenant(tenant)
        .hook(hook.id.0, &hook.callback_url)
        .detail(reason.as_str())
}

/// Removes `hook`, whose callback `failed` failed `failures` times (the last with `error`),
/// keeping what it leaves queued.
pub(crate) async fn give_up(
    ctx: &DeliveryContext,
    hook: &Hook,
    failed: &Entry,
    failures: usize,
    error: &DeliveryError,
) {
    tracing::warn!(hook_id = hook.id.0, failures, error = %error, "callbacks keep failing; removing the hook");
    tell(ctx, "hook-removed", hook, failures, about(error)).await;
    keep_abandoned(ctx, hook, failed).await;
    let (books, store) = (ctx.books(), ctx.control().store());
    book(ctx, Action::Remove, hook, DisabledReason::Failures).await;
    books.insight().removed(hook.id, &hook.callback_url);
    if let Err(e) = store.remove_failed(hook.id).await {
        tracing::error!(hook_id = hook.id.0, error = %e, "could not remove the failed hook from Redis");
    }
    let hooks = store.registry().load();
    books.metrics().count_hooks(hooks.len(), hooks.counts());
}

/// Disables `hook` for `reason` after `failures` failed attempts, the last with `error`
/// (`None`: its tenant is gone, and nothing was tried): it stays registered and keeps its
/// queue. Whether it is disabled now; `false` when it could not be disabled (gone meanwhile,
/// or Redis failed: the worker then stops, or tries again).
pub(crate) async fn disable(
    ctx: &DeliveryContext,
    hook: &Hook,
    reason: DisabledReason,
    failures: usize,
    error: Option<&DeliveryError>,
) -> bool {
    let (books, store) = (ctx.books(), ctx.control().store());
    match store.set_disabled(hook.id, Some(reason)).await {
        Ok(true) => {
            match (reason, error) {
                (DisabledReason::TenantUnknown, _) => tracing::warn!(
                    hook_id = hook.id.0,
                    tenant = hook.tenant.as_deref(),
                    "the hook's tenant is not known: the hook is disabled, its callbacks kept until the tenant is back (or tenancy.removed_grace_s passes)"
                ),
                (_, Some(error)) => {
                    tracing::warn!(hook_id = hook.id.0, failures, error = %error, "callbacks keep failing; the hook is disabled (hookrelay hooks enable, or a hooks/create of its URL, resumes it)")
                }
                (_, None) => tracing::warn!(hook_id = hook.id.0, "the hook is disabled"),
            }
            book(ctx, Action::Disable, hook, reason).await;
            let about = match error {
                Some(e) => about(e),
                None => (None, Some(reason.as_str().to_string())),
            };
            tell(ctx, "hook-disabled", hook, failures, about).await;
            let hooks = store.registry().load();
            books.metrics().count_hooks(hooks.len(), hooks.counts());
            true
        }
        Ok(false) => store.registry().is_disabled(hook.id) == Some(true),
        Err(e) => {
            tracing::error!(hook_id = hook.id.0, error = %e, "could not disable the hook");
            false
        }
    }
}

/// Waits for `hook`'s tenant, which is not known (`unknown`): while the tenants in force may
/// only not be read yet, until they are; then the hook is disabled (`tenant_unknown`) until
/// its tenant is back and the hook enabled again. `true` to try again, `false` when the worker
/// must stop (the hook is gone, or the relay stops).
pub(crate) async fn wait_for_tenant(
    ctx: &DeliveryContext,
    hook: &Hook,
    unknown: &UnknownTenant,
) -> bool {
    let (tenants, token) = (ctx.sending().signer().tenants(), ctx.control().token());
    if !tenants.settled() {
        tracing::debug!(hook_id = hook.id.0, %unknown, "waiting for the tenants to be read");
        tenants.wait_settled(token).await;
        return !token.is_cancelled();
    }
    if !disable(ctx, hook, DisabledReason::TenantUnknown, 0, None).await {
        // Redis failed: a while before trying again.
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => return true,
            () = token.cancelled() => return false,
        }
    }
    wait_enabled(ctx, hook.id).await
}

/// Tells event `id` (`hook-failing`, `-recovered`, `-disabled`, `-removed`) about `hook` after
/// `failures` failed attempts: the one place delivery tells hook notices. `about`: the last
/// answer's status and what went wrong.
pub(super) async fn tell(
    ctx: &DeliveryContext,
    id: &str,
    hook: &Hook,
    failures: usize,
    about: (Option<u16>, Option<String>),
) {
    let notice = Notice::new(id, hook, failures, about);
    notices::tell(ctx.queues().conn(), ctx.books().metrics(), &notice).await;
}

/// Waits while hook `id` is disabled: `true` once it is enabled, `false` when it is gone or
/// the worker must stop.
pub(crate) async fn wait_enabled(ctx: &DeliveryContext, id: crate::base::ids::HookId) -> bool {
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

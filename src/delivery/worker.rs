//! One hook's worker, on the hook's delivery lane: sends its queue's callbacks one at a time,
//! in order (a callback that waits for its plugins goes through the plugin set in force
//! first), retrying a failed one (same body, same timestamp) on the schedule while the later
//! ones wait; records each one delivered for [`super::ack`]; gives the hook up
//! ([`super::abandon`]) when the schedule runs out. One attempt's steps are
//! [`super::attempt`]'s. It stops when the relay stops, the hook is gone, or (in a fleet) its
//! lease is no longer held: [`super::context::Control::may_send`].

use std::{sync::Arc, time::Instant};

use super::{
    abandon,
    attempt::{HookSender, record},
    client::DeliveryError,
    context::DeliveryContext,
    hook_queue::HookQueue,
    incident::{Failures, Line},
    journal::{self, Entry},
    judge::{Decision, Spell, judge},
    retry::RetryPolicy,
};
use crate::traces::{AttemptSpan, TraceParent};
use crate::{
    config::OnGiveUp,
    hooks::{DisabledReason, Hook},
    route,
};

/// What became of one entry.
enum Outcome {
    Delivered,
    /// The schedule ran out: the hook has been removed.
    GaveUp,
    /// The relay is stopping or the hook is gone; the entry stays in Redis.
    Stopped,
}

/// Starts the worker of `hook` on `q`.
pub(super) fn spawn(
    ctx: &Arc<DeliveryContext>,
    hook: &Arc<Hook>,
    q: &Arc<HookQueue>,
) -> tokio::task::JoinHandle<()> {
    let work = ctx
        .control()
        .tracker()
        .track_future(run(hook.clone(), q.clone(), ctx.clone()));
    ctx.sending().lanes().spawn(hook.id, work)
}

/// Sends the hook's callbacks one at a time until the hook is removed or the relay stops.
async fn run(hook: Arc<Hook>, queue: Arc<HookQueue>, ctx: Arc<DeliveryContext>) {
    /// Counts the worker in `hookrelay_delivery_workers` for as long as it lives.
    struct Alive(prometheus_client::metrics::gauge::Gauge);
    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    let books = ctx.books();
    books.metrics().delivery_workers.inc();
    let _alive = Alive(books.metrics().delivery_workers.clone());
    let sender = HookSender::new(&hook, ctx.sending(), ctx.control().store().registry());
    let mut acks = books.acker().worker(hook.id);
    let _registered = books.insight().worker();
    let mut failures = Failures::default();
    let (control, token) = (ctx.control(), ctx.control().token());
    loop {
        // At most max_unacked delivered callbacks may wait to be marked in Redis.
        if !acks.ready_for_next(token).await {
            return;
        }
        let entry = loop {
            if queue.is_closed() {
                return;
            }
            if let Some(e) = queue.pop() {
                break e;
            }
            tokio::select! {
                () = queue.ready.notified() => {}
                () = token.cancelled() => return,
            }
        };
        if !control.may_send(hook.id, &queue) {
            return;
        }
        let entry = match through_plugins(&ctx, &hook, entry).await {
            Ok(e) => e,
            Err(dropped) => {
                if !queue.removals_done(token).await {
                    return;
                }
                acks.delivered(dropped);
                continue;
            }
        };
        match deliver(&ctx, &sender, &queue, &entry, &mut failures).await {
            // A drop's removal under way is written first: the mark moves the hook's cursor.
            Outcome::Delivered if queue.removals_done(token).await => {
                acks.delivered(entry.removal());
            }
            Outcome::Delivered | Outcome::GaveUp | Outcome::Stopped => return,
        }
    }
}

/// Runs the plugin set in force over a callback that waits for it (others pass as they are), off the async workers (a
/// plugin may run up to its deadline), before its first attempt: retries send what it made.
/// `Err` with the entry's removal when the chain drops it.
async fn through_plugins(
    ctx: &DeliveryContext,
    hook: &Arc<Hook>,
    mut entry: Entry,
) -> Result<Entry, journal::Removal> {
    let Some(chain) = entry.chain.take() else {
        return Ok(entry);
    };
    let plugins = ctx.sending().plugins();
    let set = plugins.current();
    let event = Arc::new(chain.event(&entry.event_id, entry.source, &entry.payload, hook.get_raw));
    let (h, ts) = (hook.clone(), entry.ts);
    // A traced callback's plugin calls become spans of its trace.
    let traced = ctx.sending().traces().zip(entry.trace.as_deref().copied());
    let noting = traced.is_some();
    let made = plugins
        .threads()
        .run(move || {
            if noting {
                crate::plugin_host::noting(|| route::apply(&set, &event, &h, ts))
            } else {
                (route::apply(&set, &event, &h, ts), Vec::new())
            }
        })
        .await
        .map(|(made, calls)| {
            if let Some((traces, parent)) = traced {
                traces.plugin_calls(&parent, &calls);
            }
            made
        });
    let dropped = &ctx.books().metrics().plugin_dropped;
    match made {
        Ok(Some(payload)) => {
            entry.payload = payload;
            Ok(entry)
        }
        Ok(None) => {
            dropped.inc();
            Err(entry.removal())
        }
        Err(e) => {
            // Only a panic outside the chain's own guard gets here: fail closed.
            tracing::error!(hook_id = hook.id.0, event = %entry.event_id, trace_id = entry.trace.as_deref().map(TraceParent::trace_id_hex), error = %e, "the plugin chain did not finish; the callback is dropped");
            dropped.inc();
            Err(entry.removal())
        }
    }
}

/// Delivers one entry with retries: at each attempt signs and sends it, [`judge`]s the
/// outcome, records the attempt and carries the decision out, until it is delivered, the hook
/// is given up, or the worker must stop.
async fn deliver(
    ctx: &DeliveryContext,
    sender: &HookSender<'_>,
    queue: &HookQueue,
    entry: &Entry,
    failures_log: &mut Failures,
) -> Outcome {
    let (hook, control) = (sender.hook, ctx.control());
    let policy = ctx.sending().retry_policy(hook.permanent);
    // A disabled hook (here or by another instance) sends nothing until it is enabled.
    if !abandon::wait_enabled(ctx, hook.id).await || !control.may_send(hook.id, queue) {
        return Outcome::Stopped;
    }
    let mut spell = Spell::default();
    loop {
        let (decision, next) = attempt(ctx, sender, entry, spell, &policy).await;
        spell = next;
        let carried = match decision {
            Decision::Delivered { .. } => {
                if let Line::Recovered { failed, lasted } = failures_log.succeeded(Instant::now()) {
                    tracing::info!(
                        hook_id = hook.id.0,
                        failed_attempts = failed,
                        failing_for_s = lasted.as_secs(),
                        "callbacks to the hook succeed again"
                    );
                }
                return Outcome::Delivered;
            }
            // Its tenant is gone: no attempt, no failure; the hook waits, disabled, for its
            // tenant (or its removal after the grace period).
            Decision::Refused(unknown) => abandon::wait_for_tenant(ctx, hook, &unknown).await,
            Decision::Retry {
                wait, tried, error, ..
            } => {
                log_retry(
                    hook,
                    entry,
                    (&error, tried),
                    wait,
                    spell.failures(),
                    failures_log,
                );
                tokio::select! {
                    () = tokio::time::sleep(wait) => true,
                    () = control.token().cancelled() => false,
                }
            }
            Decision::Exhausted { error, .. } => {
                if !control.may_send(hook.id, queue) {
                    return Outcome::Stopped;
                }
                if ctx.sending().on_give_up() == OnGiveUp::Remove {
                    abandon::give_up(ctx, hook, entry, spell.failures(), &error).await;
                    return Outcome::GaveUp;
                }
                let failures = spell.failures();
                spell = spell.restarted();
                disable_until_enabled(ctx, hook, failures, &error).await
            }
        };
        if !carried || !control.may_send(hook.id, queue) {
            return Outcome::Stopped;
        }
    }
}

/// One attempt at `entry`, signed anew (a rotation of its secrets applies to the next one),
/// sent, judged and recorded, the hook notice it calls for told: the decision to carry out,
/// and the spell after it.
async fn attempt(
    ctx: &DeliveryContext,
    sender: &HookSender<'_>,
    entry: &Entry,
    spell: Spell,
    policy: &RetryPolicy,
) -> (Decision, Spell) {
    let hook = sender.hook;
    let span = ctx
        .sending()
        .traces()
        .zip(entry.trace.as_deref().copied())
        .map(|(traces, parent)| {
            let about = (&*entry.event_id, spell.failures());
            traces.attempt(&parent, hook.id.0, &hook.callback_url, about)
        });
    let traceparent = span
        .as_ref()
        .filter(|_| ctx.sending().traceparent())
        .and_then(AttemptSpan::traceparent)
        .map(|t| t.to_string());
    let (attempt, started) = match sender.prepare(entry) {
        Ok(prepared) => {
            let started = Instant::now();
            let sent = sender.send(&prepared, traceparent.as_deref()).await;
            (Ok(sent), started)
        }
        Err(unknown) => (Err(unknown), Instant::now()),
    };
    let seen = span.as_ref().map(|_| seen(&attempt));
    let failing_after = ctx.sending().failing_after();
    let (decision, spell) = judge(attempt, spell, policy, failing_after);
    if let (Some(span), Some((status, error))) = (span, seen) {
        span.finish(status, error, verdict(&decision));
    }
    if let Decision::Delivered { .. } = decision {
        // Kept (per registration: a tenant's callbacks never go to another tenant's hook of
        // the same URL) before its attempt is recorded: once the attempt shows, the callback
        // can be sent again.
        let key = hook.registration().key();
        ctx.books().insight().keep_sent(&key, entry);
    }
    if let Some(outcome) = decision.attempted() {
        record(
            ctx.books(),
            hook,
            entry,
            outcome,
            (spell.failures(), policy),
            started,
        );
    }
    if let Some(tell) = decision.tell() {
        let about = decision.about();
        abandon::tell(ctx, tell.event_id(), hook, spell.failures(), about).await;
    }
    (decision, spell)
}

/// What an attempt's span says of its outcome: the receiver's status, and the failure's kind
/// and message.
fn seen(
    attempt: &Result<Result<u16, DeliveryError>, super::sign::UnknownTenant>,
) -> (Option<u16>, Option<(String, String)>) {
    match attempt {
        Ok(Ok(status)) => (Some(*status), None),
        Ok(Err(e)) => {
            let status = match e {
                DeliveryError::Status(code) => Some(*code),
                _ => None,
            };
            (status, Some((e.reason(), e.to_string())))
        }
        Err(unknown) => (None, Some(("tenant_unknown".into(), unknown.to_string()))),
    }
}

/// The judge's verdict, in a word.
fn verdict(decision: &Decision) -> &'static str {
    match decision {
        Decision::Delivered { .. } => "delivered",
        Decision::Retry { .. } => "retry",
        Decision::Exhausted { .. } => "exhausted",
        Decision::Refused(_) => "refused",
    }
}

/// Disables `hook`, whose schedule ran out after `failures` failures (the last `error`): this
/// callback, and the queue behind it, wait until it is enabled; then its schedule starts
/// again. `false` when the worker must stop.
async fn disable_until_enabled(
    ctx: &DeliveryContext,
    hook: &Hook,
    failures: usize,
    error: &DeliveryError,
) -> bool {
    let enabled = abandon::disable(ctx, hook, DisabledReason::Failures, failures, Some(error))
        .await
        && abandon::wait_enabled(ctx, hook.id).await;
    if enabled {
        tracing::info!(
            hook_id = hook.id.0,
            "the hook is enabled again: sending its kept callbacks"
        );
    }
    enabled
}

/// Logs a failed attempt (`tried`) or one held back by its receiver's open circuit, to be
/// tried again after `wait`: failures as `failures_log` allows (a line per minute per hook).
fn log_retry(
    hook: &Hook,
    entry: &Entry,
    (error, tried): (&DeliveryError, bool),
    wait: std::time::Duration,
    failures: usize,
    failures_log: &mut Failures,
) {
    let retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    if !tried {
        tracing::debug!(
            hook_id = hook.id.0,
            retry_in_ms,
            "held back: the receiver's circuit is open"
        );
    } else if let Line::Failed { before } = failures_log.failed(Instant::now()) {
        tracing::info!(
            hook_id = hook.id.0,
            event = %entry.event_id,
            trace_id = entry.trace.as_deref().map(TraceParent::trace_id_hex),
            attempt = failures,
            error = %error,
            retry_in_ms,
            failed_since_last_line = before,
            "a callback failed; retrying (one line a minute per hook while it goes on)"
        );
    } else {
        tracing::debug!(hook_id = hook.id.0, event = %entry.event_id, trace_id = entry.trace.as_deref().map(TraceParent::trace_id_hex), failures, error = %error, retry_in_ms, "callback failed");
    }
}

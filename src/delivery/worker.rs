//! One hook's worker, on the hook's delivery lane: sends its queue's callbacks one at a time,
//! in order (a callback that waits for its plugins goes through the plugin set in force
//! first), retrying a failed one (same body, same timestamp) on the schedule while the later
//! ones wait; records each one delivered for [`super::ack`]; removes the hook when the
//! schedule runs out. It stops when the relay stops, the hook is gone, or (in a fleet) its
//! lease is no longer held.

use std::sync::Arc;

use bytes::Bytes;

use std::time::Instant;

use super::{
    client::{CallbackHeaders, DeliveryError, Receiver},
    context::DeliveryContext,
    hook_queue::{HookQueue, PAGE},
    incident::{Failures, Line},
    insight::AttemptRecord,
    journal::{self, Entry},
    payloads::resolve,
    retry::RetryPolicy,
    sign::{SignedCallback, signed_parsed},
};
use crate::{base::time::now_ms, hooks::Hook, metrics::ReasonLabel, plugin_host::threads, route};

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
        .tracker
        .track_future(run(hook.clone(), q.clone(), ctx.clone()));
    ctx.lanes.spawn(hook.id, work)
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
    ctx.metrics.delivery_workers.inc();
    let _alive = Alive(ctx.metrics.delivery_workers.clone());
    let policy = RetryPolicy::new(&ctx.retry_intervals_ms, hook.permanent);
    // An IP address in the URL is checked once; host names at each connection.
    let blocked = ctx
        .guard
        .check_url(&hook.callback_url)
        .err()
        .map(|r| r.to_string());
    let receiver = ctx.lanes.client(hook.id).receiver(&hook.callback_url);
    // Parsed once: each callback's URL is this one with its checksum added.
    let parsed = reqwest::Url::parse(&hook.callback_url).ok();
    let mut acks = ctx.acker.worker(hook.id);
    let _recording = ctx.insight.worker();
    let mut failures = Failures::default();
    loop {
        // At most max_unacked delivered callbacks may wait to be marked in Redis.
        if !acks.ready_for_next(&ctx.token).await {
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
                () = ctx.token.cancelled() => return,
            }
        };
        if ctx.token.is_cancelled()
            || !ctx.store.registry().contains(hook.id)
            || !ctx.fence.holds()
            || !queue.may_send()
        {
            return;
        }
        let entry = match through_plugins(&ctx, &hook, entry).await {
            Ok(e) => e,
            Err(dropped) => {
                acks.delivered(dropped);
                continue;
            }
        };
        let attempt = Attempt {
            hook: &hook,
            queue: &queue,
            policy: &policy,
            blocked: blocked.as_deref(),
            receiver: &receiver,
            parsed: parsed.as_ref(),
            ctx: &ctx,
        };
        match attempt.deliver(&entry, &mut failures).await {
            Outcome::Delivered => {
                acks.delivered(entry.removal());
                ctx.insight.keep(&hook.callback_url, [entry]);
            }
            Outcome::GaveUp | Outcome::Stopped => return,
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
    let set = ctx.plugins.current();
    let event = Arc::new(chain.event(&entry.event_id, entry.source, &entry.payload, hook.get_raw));
    let (h, ts) = (hook.clone(), entry.ts);
    let made = threads::run(move || route::apply(&set, &event, &h, ts)).await;
    match made {
        Ok(Some(payload)) => {
            entry.payload = payload;
            Ok(entry)
        }
        Ok(None) => {
            ctx.metrics.plugin_dropped.inc();
            Err(entry.removal())
        }
        Err(e) => {
            // Only a panic outside the chain's own guard gets here: fail closed.
            tracing::error!(hook_id = hook.id.0, event = %entry.event_id, error = %e, "the plugin chain did not finish; the callback is dropped");
            ctx.metrics.plugin_dropped.inc();
            Err(entry.removal())
        }
    }
}

/// Keeps what a hook removed after failures leaves queued, the callback that failed first,
/// for `redeliver` (up to the bytes kept per URL): the queue goes with the hook.
async fn keep_abandoned(ctx: &DeliveryContext, hook: &Hook, failed: &Entry) {
    let Some(max_bytes) = ctx.insight.retained_bytes() else {
        return;
    };
    let mut kept = vec![failed.clone()];
    let (mut after, mut bytes) = (failed.ts, 0u64);
    loop {
        let mut conn = ctx.conn.clone();
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
        match resolve(conn, hook.id, &page, &ctx.paged, &ctx.sources).await {
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
    ctx.insight.keep(&hook.callback_url, kept);
}

/// What one delivery needs of its worker.
struct Attempt<'a> {
    hook: &'a Hook,
    queue: &'a HookQueue,
    policy: &'a RetryPolicy,
    /// Why the callback URL is refused, when its IP address is.
    blocked: Option<&'a str>,
    /// The receiver whose turns its callbacks take.
    receiver: &'a Receiver,
    /// The callback URL, parsed.
    parsed: Option<&'a reqwest::Url>,
    ctx: &'a DeliveryContext,
}

impl Attempt<'_> {
    /// Delivers one entry with retries; failed attempts and the end of a failing spell are logged
    /// as `failures` allows (a line per minute).
    async fn deliver(&self, entry: &Entry, failures_log: &mut Failures) -> Outcome {
        let Self {
            hook,
            queue,
            policy,
            blocked,
            receiver,
            parsed,
            ctx,
        } = *self;
        let SignedCallback {
            url,
            body,
            content_type,
            timestamp_header,
        } = ctx.signer.sign(
            &hook.callback_url,
            &entry.payload,
            entry.original_ts(),
            entry.source,
        );
        let domain = ctx.signer.sources.domain(entry.source);
        let bearer = ctx.signer.bearer();
        let body = Bytes::from(body);
        let target = parsed.and_then(|p| signed_parsed(&hook.callback_url, p, &url));
        let mut failures = 0;
        loop {
            let started = Instant::now();
            // An attempt under way is finished even when the relay is stopping (the request timeout
            // bounds it), so that a delivered callback is not sent again after a restart.
            let result = match blocked {
                Some(why) => Err(DeliveryError::Blocked(why.to_string())),
                None => {
                    let standard = ctx
                        .signer
                        .standard_headers(hook.id, entry.original_ts(), &body);
                    let headers = CallbackHeaders {
                        bearer,
                        standard: standard.as_ref(),
                        domain,
                        redelivery: entry.original.is_some(),
                        timestamp: timestamp_header,
                    };
                    let body = body.clone();
                    match &target {
                        Some(u) => receiver.post(u.clone(), body, content_type, headers).await,
                        None => receiver.post(&url, body, content_type, headers).await,
                    }
                }
            };
            let mut record = AttemptRecord {
                at: now_ms(),
                event: entry.event_id.to_string(),
                ts: entry.original_ts(),
                attempt: u32::try_from(failures + 1).unwrap_or(u32::MAX),
                status: None,
                error: None,
                latency_ms: started.elapsed().as_secs_f64() * 1e3,
            };
            let err = match result {
                Ok(status) => {
                    record.status = Some(status);
                    ctx.insight.attempt(hook.id, record, None);
                    ctx.metrics.callbacks_delivered.inc();
                    if let Line::Recovered { failed, lasted } =
                        failures_log.succeeded(Instant::now())
                    {
                        tracing::info!(
                            hook_id = hook.id.0,
                            failed_attempts = failed,
                            failing_for_s = lasted.as_secs(),
                            "callbacks to the hook succeed again"
                        );
                    }
                    if let Some(arrived) = entry.arrived {
                        let seconds = arrived.elapsed().as_secs_f64();
                        ctx.metrics.callback_latency.0.observe(seconds);
                    }
                    return Outcome::Delivered;
                }
                Err(e) => e,
            };
            failures += 1;
            if let DeliveryError::Status(code) = err {
                record.status = Some(code);
            }
            record.error = Some(err.to_string());
            let due = policy
                .left_after(failures)
                .map(|left| record.at + u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
            ctx.insight.attempt(hook.id, record, due);
            ctx.metrics
                .callback_failures
                .get_or_create(&ReasonLabel {
                    reason: err.reason(),
                })
                .inc();
            let Some(wait) = policy.next_delay(failures).filter(|_| err.should_retry()) else {
                if !ctx.fence.holds() || !queue.may_send() {
                    return Outcome::Stopped;
                }
                tracing::warn!(hook_id = hook.id.0, failures, error = %err, "callbacks keep failing; removing the hook");
                keep_abandoned(ctx, hook, entry).await;
                ctx.metrics.hooks_removed.inc();
                ctx.insight.removed(hook.id, &hook.callback_url);
                if let Err(e) = ctx.store.remove_failed(hook.id).await {
                    tracing::error!(hook_id = hook.id.0, error = %e, "could not remove the failed hook from Redis");
                }
                {
                    let hooks = ctx.store.registry().load();
                    ctx.metrics.count_hooks(hooks.len(), hooks.counts());
                }
                return Outcome::GaveUp;
            };
            if let Line::Failed { before } = failures_log.failed(Instant::now()) {
                tracing::info!(
                    hook_id = hook.id.0,
                    event = %entry.event_id,
                    attempt = failures,
                    error = %err,
                    retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    failed_since_last_line = before,
                    "a callback failed; retrying (one line a minute per hook while it goes on)"
                );
            } else {
                tracing::debug!(hook_id = hook.id.0, event = %entry.event_id, failures, error = %err, retry_in_ms = wait.as_millis() as u64, "callback failed");
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = ctx.token.cancelled() => return Outcome::Stopped,
            }
            if !ctx.store.registry().contains(hook.id) || !ctx.fence.holds() || !queue.may_send() {
                return Outcome::Stopped;
            }
        }
    }
}

//! Per-hook queues: the dispatcher puts each (event, hook) pair on that hook's FIFO; one worker
//! per hook sends them one at a time, in order, retrying a failed callback (same body, same
//! timestamp) while the later ones wait, and removes the hook when the schedule runs out. A slow
//! hook only ever delays itself.

use std::{collections::HashMap, sync::Arc};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    Timestamps,
    client::CallbackClient,
    retry::RetryPolicy,
    sign::{self, Algorithm},
};
use crate::{
    config::{Compat, Secret},
    event::Event,
    hooks::{Hook, HookStore},
    metrics::{Metrics, ReasonLabel},
};

/// What every worker shares.
pub struct DeliveryContext {
    pub client: CallbackClient,
    pub store: Arc<HookStore>,
    pub secret: Secret,
    pub algorithm: Algorithm,
    pub compat: Compat,
    /// `domain` of the reference body form.
    pub domain: String,
    pub retry_intervals_ms: Vec<u64>,
    pub timestamps: Timestamps,
    pub metrics: Arc<Metrics>,
    pub token: CancellationToken,
    pub tracker: TaskTracker,
}

/// One callback to make: the event, and whether the hook wants the raw message.
struct Job {
    event: Arc<Event>,
}

/// Owns the queue of every hook; used by the pipeline's single processing task only.
pub struct Dispatcher {
    ctx: Arc<DeliveryContext>,
    queues: HashMap<u64, mpsc::UnboundedSender<Job>>,
}

impl Dispatcher {
    pub fn new(ctx: Arc<DeliveryContext>) -> Self {
        Self {
            ctx,
            queues: HashMap::new(),
        }
    }

    /// Queues `event` for `hook`, starting the hook's worker on first use.
    pub fn dispatch(&mut self, hook: &Arc<Hook>, event: &Arc<Event>) {
        let job = Job {
            event: event.clone(),
        };
        let tx = self
            .queues
            .entry(hook.id)
            .or_insert_with(|| spawn_worker(hook.clone(), &self.ctx));
        if let Err(mpsc::error::SendError(job)) = tx.send(job) {
            // The worker ended (its hook was removed); a hook that is back gets a new one.
            self.queues.remove(&hook.id);
            let tx = spawn_worker(hook.clone(), &self.ctx);
            let _ = tx.send(job);
            self.queues.insert(hook.id, tx);
        }
    }

    /// Closes the queues of hooks that no longer exist; their workers end.
    pub fn prune(&mut self) {
        let snapshot = self.ctx.store.registry().load();
        self.queues.retain(|id, _| snapshot.get(*id).is_some());
    }
}

fn spawn_worker(hook: Arc<Hook>, ctx: &Arc<DeliveryContext>) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel();
    let ctx = ctx.clone();
    ctx.tracker.clone().spawn(worker(hook, rx, ctx));
    tx
}

/// Sends the hook's callbacks one at a time until its queue closes, the hook is removed or the
/// relay stops.
async fn worker(hook: Arc<Hook>, mut rx: mpsc::UnboundedReceiver<Job>, ctx: Arc<DeliveryContext>) {
    let policy = RetryPolicy::new(&ctx.retry_intervals_ms, hook.permanent);
    loop {
        let job = tokio::select! {
            j = rx.recv() => j,
            () = ctx.token.cancelled() => None,
        };
        let Some(job) = job else { return };
        if !ctx.store.registry().contains(hook.id) {
            return;
        }
        if !deliver(&hook, &job, &policy, &ctx).await {
            return;
        }
    }
}

/// Delivers one job with retries. `false` when the worker must stop (hook gone or relay stopping).
async fn deliver(hook: &Hook, job: &Job, policy: &RetryPolicy, ctx: &DeliveryContext) -> bool {
    let payload = if hook.get_raw {
        &job.event.raw
    } else {
        &job.event.processed
    };
    let ts = ctx.timestamps.next();
    let body = match ctx.compat {
        Compat::Spec => sign::spec_body(payload.form_encoded(), ts),
        Compat::Reference => sign::reference_body(&ctx.domain, payload.form_encoded(), ts),
    };
    let checksum = sign::callback_checksum(
        ctx.algorithm,
        &hook.callback_url,
        &body,
        ctx.secret.expose(),
    );
    let url = sign::signed_url(&hook.callback_url, &checksum);
    let body = Bytes::from(body);
    let mut failures = 0;
    loop {
        let result = tokio::select! {
            r = ctx.client.post(&url, body.clone()) => r,
            () = ctx.token.cancelled() => return false,
        };
        let err = match result {
            Ok(_) => {
                ctx.metrics.callbacks_delivered.inc();
                return true;
            }
            Err(e) => e,
        };
        failures += 1;
        ctx.metrics
            .callback_failures
            .get_or_create(&ReasonLabel {
                reason: err.reason(),
            })
            .inc();
        let Some(wait) = policy.next_delay(failures).filter(|_| err.should_retry()) else {
            tracing::warn!(hook_id = hook.id, failures, error = %err, "callbacks keep failing; removing the hook");
            ctx.metrics.hooks_removed.inc();
            if let Err(e) = ctx.store.remove_failed(hook.id).await {
                tracing::error!(hook_id = hook.id, error = %e, "could not remove the failed hook from Redis");
            }
            ctx.metrics
                .hooks_registered
                .set(ctx.store.registry().load().len() as i64);
            return false;
        };
        tracing::debug!(hook_id = hook.id, event = %job.event.id, failures, error = %err, retry_in_ms = wait.as_millis() as u64, "callback failed");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = ctx.token.cancelled() => return false,
        }
        if !ctx.store.registry().contains(hook.id) {
            return false;
        }
    }
}

//! Publishes one destination's queue, a message at a time in queue order (so every meeting's
//! events arrive in bus order): a message leaves the queue once the broker confirmed it, or
//! when the broker can never take it (larger than its limit: skipped, counted, logged with its
//! event). Anything else (broker down, credentials refused, no such exchange or stream, no
//! confirmation in time) is waited out on the retry schedule, whose last interval repeats
//! without end: a destination is never given up.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    link::{Failure, Link},
    message::Message,
    queue::{self, State},
};
use crate::{
    base::time::now_ms,
    config::destinations::{DestinationConfig, DestinationKind},
    delivery::RetryPolicy,
    hooks::Hook,
    metrics::Metrics,
    plugin_host::Plugins,
    shutdown::{pause, retry_until_ok},
    store_conn::StoreConn,
};

/// Messages read from a queue at a time.
const PAGE: usize = 64;
/// How often an idle sender looks at its queue without being woken (another instance of a
/// fleet may have queued for it before this one took over).
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// What a sender is started with.
pub(super) struct Setup {
    pub(super) conn: StoreConn,
    pub(super) config: DestinationConfig,
    pub(super) metrics: Arc<Metrics>,
    /// The plugin set in force, for the destination's `plugins`.
    pub(super) plugins: Arc<Plugins>,
    /// How long published messages are kept for `redeliver` (`delivery.retain`), in ms.
    pub(super) retain_ms: u64,
    /// The tracer, while traces are on: a traced message's tries are spans of its trace.
    pub(super) traces: Option<Arc<crate::traces::Traces>>,
}

/// A sender's handle: wakes it, counts what waits in its queue.
#[derive(Clone, Default)]
pub(super) struct Handle {
    pub(super) wake: Arc<Notify>,
    pub(super) depth: Arc<AtomicUsize>,
}

/// What a destination's plugins made of a message.
enum Plugged {
    Same,
    Replaced(Box<Message>),
    Dropped,
}

/// One sender's running state.
struct Sender {
    setup: Setup,
    /// The destination as its plugins see it.
    hook: Arc<Hook>,
    link: Link,
    policy: RetryPolicy,
    timeout: Duration,
    state: State,
}

/// Publishes destination `setup.config`'s queue until `token` is cancelled.
pub(super) async fn run(setup: Setup, handle: Handle, token: CancellationToken) {
    let name = setup.config.name.clone();
    let link = match Link::new(&setup.config) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(destination = %name, error = %e, "a destination cannot be set up; its messages wait in its queue");
            return;
        }
    };
    let mut sender = Sender {
        hook: Arc::new(super::plugins::as_hook(&name, setup.config.raw)),
        policy: RetryPolicy::new(&setup.config.retry_intervals_ms, true),
        timeout: Duration::from_millis(setup.config.publish_timeout_ms),
        state: State {
            state: "ok".into(),
            since_ms: now_ms(),
            ..State::default()
        },
        link,
        setup,
    };
    sender.save_state().await;
    let conn = sender.setup.conn.clone();
    let read_what = format!("read destination {name}'s queue");
    loop {
        let read = || {
            let mut c = conn.clone();
            let name = name.clone();
            async move { queue::read(&mut c, &name, PAGE).await }
        };
        let Some(page) = retry_until_ok(&token, &read_what, read).await else {
            return;
        };
        sender.show_oldest(page.first().map(|(_, m)| m));
        if page.is_empty() {
            handle.depth.store(0, Ordering::Relaxed);
            sender.show_depth(0);
            tokio::select! {
                () = handle.wake.notified() => {}
                () = tokio::time::sleep(IDLE_LOOK) => {}
                () = token.cancelled() => return,
            }
            continue;
        }
        // Taken off the queue a page at a time, in one round trip: a relay killed before
        // then publishes them again, with the ids they had.
        let mut finished: Vec<(&str, Option<&Message>)> = Vec::with_capacity(page.len());
        for (i, (entry, message)) in page.iter().enumerate() {
            sender.show_depth(handle.depth.load(Ordering::Relaxed));
            let made = sender.through_plugins(message).await;
            let out = match &made {
                Plugged::Same => Some(message),
                Plugged::Replaced(m) => Some(&**m),
                Plugged::Dropped => None,
            };
            let published = match out {
                Some(m) => match sender.publish(m, &token).await {
                    Some(confirmed) => confirmed,
                    None => {
                        finish(&conn, &name, &finished, sender.setup.retain_ms, &token).await;
                        return;
                    }
                },
                None => false,
            };
            // What is kept to send again is the message as queued: plugins run again then.
            finished.push((entry, published.then_some(message)));
            let left = handle.depth.load(Ordering::Relaxed).saturating_sub(1);
            handle.depth.store(left, Ordering::Relaxed);
            sender.show_depth(left);
            sender.show_oldest(page.get(i + 1).map(|(_, m)| m));
        }
        if !finish(&conn, &name, &finished, sender.setup.retain_ms, &token).await {
            return;
        }
    }
}

/// Takes `finished` off the queue (keeping those published for `retain_ms`), trying again
/// while Redis fails; `false` when cancelled first.
async fn finish(
    conn: &StoreConn,
    name: &str,
    finished: &[(&str, Option<&Message>)],
    retain_ms: u64,
    token: &CancellationToken,
) -> bool {
    if finished.is_empty() {
        return true;
    }
    let what = format!("take published messages off destination {name}'s queue");
    retry_until_ok(token, what, || {
        let mut c = conn.clone();
        async move { queue::done(&mut c, name, finished, retain_ms).await }
    })
    .await
    .is_some()
}

impl Sender {
    fn name(&self) -> &str {
        &self.setup.config.name
    }

    /// What the destination's plugins make of `m` (a drop is counted).
    async fn through_plugins(&self, m: &Message) -> Plugged {
        let names = &self.setup.config.plugins;
        if names.is_empty() {
            return Plugged::Same;
        }
        match super::plugins::apply(&self.setup.plugins, names, &self.hook, m).await {
            Some(body) if body == m.body => Plugged::Same,
            Some(body) => Plugged::Replaced(Box::new(Message { body, ..m.clone() })),
            None => {
                self.setup
                    .metrics
                    .destinations
                    .skipped(self.name(), "plugin");
                Plugged::Dropped
            }
        }
    }

    /// Tries `m` until the broker confirms it (`Some(true)`) or can never take it
    /// (`Some(false)`); `None` when cancelled first.
    async fn publish(&mut self, m: &Message, token: &CancellationToken) -> Option<bool> {
        let mut failures = 0usize;
        loop {
            let started = Instant::now();
            let span = self.try_span(m, failures);
            let outcome = tokio::select! {
                r = tokio::time::timeout(self.timeout, self.link.publish(m)) => {
                    r.unwrap_or(Err(Failure::Timeout))
                }
                () = token.cancelled() => return None,
            };
            let metrics = &self.setup.metrics.destinations;
            metrics.observe(self.name(), started.elapsed());
            if let Some(span) = span {
                match &outcome {
                    Ok(()) => span.finish(None, None, "published"),
                    Err(Failure::TooLarge(d)) => {
                        span.finish(None, Some(("too_large".into(), d.clone())), "skipped");
                    }
                    Err(f) => span.finish(None, Some((f.reason().into(), f.to_string())), "retry"),
                }
            }
            let failure = match outcome {
                Ok(()) => {
                    metrics.published(self.name());
                    self.state.published += 1;
                    if failures > 0 {
                        tracing::info!(destination = %self.name(), failures, "a destination takes messages again");
                        self.set_state("ok", None).await;
                    }
                    return Some(true);
                }
                Err(Failure::TooLarge(detail)) => {
                    metrics.skipped(self.name(), "too_large");
                    tracing::warn!(destination = %self.name(), event = %m.event, message_id = %m.id, bytes = m.body.len(), %detail, "the broker cannot take a message this large; it is skipped");
                    return Some(false);
                }
                Err(f) => f,
            };
            failures += 1;
            metrics.failed(self.name(), failure.reason());
            self.link.reset().await;
            let line = failure.to_string();
            if failures == 1 {
                tracing::warn!(destination = %self.name(), reason = failure.reason(), error = %line, "a destination does not take messages; they wait and are tried again");
            } else {
                tracing::debug!(destination = %self.name(), reason = failure.reason(), error = %line, failures, "a destination still does not take messages");
            }
            if self.state.state != "failing" || self.state.last_error != line {
                self.set_state("failing", Some(line)).await;
            }
            let delay = self
                .policy
                .next_delay(failures)
                .unwrap_or(Duration::from_secs(1));
            if pause(token, delay).await {
                return None;
            }
        }
    }

    /// The span of one try of `m` (after `failures` failed ones), when `m` is traced.
    fn try_span(&self, m: &Message, failures: usize) -> Option<crate::traces::AttemptSpan> {
        use opentelemetry::KeyValue;
        let (traces, parent) = self.setup.traces.as_deref().zip(m.trace)?;
        let system = match self.setup.config.kind() {
            Some(DestinationKind::Nats) => "nats",
            Some(DestinationKind::Amqp) => "rabbitmq",
            Some(DestinationKind::Mqtt) => "mqtt",
            Some(DestinationKind::File) | None => "file",
        };
        let mut attributes = vec![
            KeyValue::new("messaging.system", system),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.destination.name", m.target.clone()),
            KeyValue::new("messaging.message.id", m.id.clone()),
            KeyValue::new("hookrelay.destination", self.name().to_string()),
            KeyValue::new("hookrelay.event.id", m.event.clone()),
        ];
        if failures > 0 {
            attributes.push(KeyValue::new("hookrelay.retry", failures as i64));
        }
        let name = format!("publish {}", m.target);
        let kind = opentelemetry::trace::SpanKind::Producer;
        Some(traces.output_attempt(&parent, name, kind, attributes))
    }

    async fn set_state(&mut self, state: &str, error: Option<String>) {
        if self.state.state != state {
            self.state.since_ms = now_ms();
        }
        state.clone_into(&mut self.state.state);
        if let Some(e) = error {
            self.state.last_error = e;
        }
        self.save_state().await;
    }

    async fn save_state(&mut self) {
        let mut conn = self.setup.conn.clone();
        if let Err(e) = queue::set_state(&mut conn, &self.setup.config.name, &self.state).await {
            tracing::debug!(destination = %self.name(), error = %e, "cannot write a destination's state");
        }
        self.setup
            .metrics
            .destinations
            .up(self.name(), self.state.state == "ok");
    }

    fn show_depth(&self, depth: usize) {
        self.setup.metrics.destinations.depth(self.name(), depth);
    }

    /// Shows the age of `oldest`, the first message waiting (none: 0).
    fn show_oldest(&self, oldest: Option<&Message>) {
        let age = oldest.map_or(0, |m| now_ms().saturating_sub(m.queued_ms));
        self.setup
            .metrics
            .destinations
            .oldest(self.name(), Duration::from_millis(age));
    }
}

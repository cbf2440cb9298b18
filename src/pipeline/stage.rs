//! The processing stage: one task that takes bus messages in batches, routes them
//! ([`crate::route`]) and hands the callbacks, with the batch's id mapping changes, to the
//! dispatcher, which persists both in one pipeline before queueing. One task, so mappings change
//! in bus order before the next message.

use crate::base::ids::HookId;

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    base::{
        redis_keys::SourceKeys,
        sources::{SourceId, SourceTable},
        time::now_ms,
    },
    bus::BusMessage,
    conference,
    delivery::{Dispatcher, journal::Commit, tidy},
    event::persist,
    fleet::{AlreadyQueued, Cursors, Fence},
    hooks::{Registry, Snapshot},
    metrics::Metrics,
    pipeline::{edges::Joined, follower::Resumed},
    plugin_host::Plugins,
    route::{MessageRouter, Routed},
};

/// How often the redeliveries asked for are looked for.
const REDELIVERIES_EVERY: Duration = Duration::from_millis(250);
/// How often the streams of idle hooks with empty queues are looked at.
const TIDY_EVERY: Duration = Duration::from_secs(60);
/// How often expired mappings are dropped and closed queues pruned: every 10 s, or every
/// quarter of a shorter inactivity timeout.
fn sweep_every(inactivity_timeout: Duration) -> Duration {
    (inactivity_timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(10))
}
/// Most bus messages processed (and their callbacks persisted in one pipeline) at a time.
pub(super) const BATCH: usize = 256;
/// About the most callbacks one batch makes: with many hooks a batch holds fewer messages, so
/// that the transaction that persists it (built in memory whole) stays small. 1,024 rather
/// than 4,096: a 100-hook burst's peak heap was 0.88 of it at the same CPU, and 10 hooks went
/// 1.07 times as fast (BENCHMARKS.md, issue 63).
const BATCH_CALLBACKS: usize = 1024;

/// How many bus messages to take at once when one event matches at most `widest` hooks.
fn batch_limit(widest: usize) -> usize {
    (BATCH_CALLBACKS / widest.max(1)).clamp(1, BATCH)
}

pub(super) struct ProcessStage {
    /// Decode, map, match: plugins are not run here but in the hooks' workers (the router
    /// defers them), so routing is cheap and stays on this task.
    pub(super) router: MessageRouter,
    /// The hook snapshot last seen: when it changes, the queues of removed hooks are closed.
    pub(super) last_snapshot: Option<Arc<Snapshot>>,
    pub(super) dispatcher: Dispatcher,
    pub(super) registry: Arc<Registry>,
    pub(super) plugins: Arc<Plugins>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) sources: Arc<SourceTable>,
    /// Where each source's mappings and conference state are stored, by source.
    pub(super) keys: Vec<SourceKeys>,
    /// Each source's conference state, by source (its processor shows it every event).
    pub(super) conferences: Vec<crate::conference::SharedConference>,
    /// In a fleet: where this instance stands in each source, written with each batch.
    pub(super) cursors: Option<Cursors>,
    /// In a fleet: nothing is queued once the lease is lost.
    pub(super) fence: Fence,
    /// The xAPI output, when on.
    pub(super) xapi: Option<crate::xapi::Output>,
    /// The destinations (`[[destinations]]`), when there are any.
    pub(super) destinations: Option<crate::destinations::Output>,
    /// The servers of a pool whose edges appear ([`super::edges`]), added before their
    /// messages; `None` when the relay takes no edges.
    pub(super) joins: Option<mpsc::Receiver<Joined>>,
    /// The edges' servers, as the `bbb_*` series show them.
    pub(super) joined: crate::conference::Joined,
    /// Each edge's source and the key of what was taken of its stream, written with each
    /// batch that has its messages.
    pub(super) taken: Vec<(SourceId, String)>,
    /// The batch limit of the hook snapshot it was worked out for.
    pub(super) limit: Option<(Arc<Snapshot>, usize)>,
    /// The tracer, while traces are on: each message's spans ([`super::traced`]).
    pub(super) traces: Option<Arc<crate::traces::Traces>>,
}

impl ProcessStage {
    /// Processes `first` (what a new holder of the fleet lease queues first, less what the
    /// last holder's marks say is queued already), then the bus.
    pub(super) async fn run(
        mut self,
        first: Resumed,
        mut rx: mpsc::Receiver<BusMessage>,
        token: CancellationToken,
    ) {
        for (i, chunk) in first.messages.chunks(BATCH).enumerate() {
            if !self.handle_resumed(chunk, &first.queued, i * BATCH).await {
                return;
            }
        }
        let timeout = Duration::from_millis(
            self.router
                .processors()
                .first()
                .map_or(40_000, |p| p.mappings.timeout_ms()),
        );
        let mut sweep = tokio::time::interval(sweep_every(timeout));
        let mut redeliveries = tokio::time::interval(REDELIVERIES_EVERY);
        redeliveries.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_tidy = std::time::Instant::now();
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            let limit = self.batch_limit();
            tokio::select! {
                biased;
                () = token.cancelled() => {
                    self.drain_at_stop(&mut rx, &mut batch).await;
                    self.handle(&batch).await;
                    return;
                }
                // Before the bus, or a busy bus would starve it (it is ready every 10 s only).
                _ = sweep.tick() => {
                    if let Some(depths) = self.sweep() {
                        let conn = self.dispatcher.conn();
                        super::depths::report_queues(&self.metrics, &conn, &depths, &self.registry).await;
                    }
                    // Expired mappings are removed from Redis too.
                    if !self.handle(&[]).await {
                        break;
                    }
                    if last_tidy.elapsed() >= TIDY_EVERY {
                        last_tidy = std::time::Instant::now();
                        self.drop_idle_queues().await;
                    }
                }
                Some(joined) = super::joins::next(&mut self.joins) => self.join(joined),
                _ = redeliveries.tick() => {
                    if !self.redeliver().await || !self.hook_notices().await {
                        break;
                    }
                }
                n = rx.recv_many(&mut batch, limit) => {
                    if n == 0 {
                        return;
                    }
                    let accepted = self.handle(&batch).await;
                    batch.clear();
                    if !accepted {
                        break;
                    }
                }
            }
        }
    }

    /// At the stop: the messages already taken off the bus, and (alone) those the subscribers
    /// hand on as they unsubscribe, until the last subscriber is gone (the channel closes),
    /// within the subscribers' bound. In a fleet the lease goes at the stop and the others
    /// keep what this instance had not processed, so only what is here already is taken.
    async fn drain_at_stop(
        &self,
        rx: &mut mpsc::Receiver<BusMessage>,
        batch: &mut Vec<BusMessage>,
    ) {
        if self.fence.is_fleet() {
            while let Ok(m) = rx.try_recv() {
                batch.push(m);
            }
            return;
        }
        // A little longer than the subscribers' own bound, which starts at the same stop.
        let deadline =
            tokio::time::Instant::now() + crate::bus::DRAIN_WITHIN + Duration::from_millis(500);
        while let Ok(n) = tokio::time::timeout_at(deadline, rx.recv_many(batch, BATCH)).await {
            if n == 0 {
                break;
            }
        }
        tracing::debug!(messages = batch.len(), "processed at the stop");
    }

    /// How many bus messages to take at once with the hooks in force: many per-meeting hooks
    /// (one each for a thousand meetings) leave batches whole, many global ones shrink them.
    fn batch_limit(&mut self) -> usize {
        let snapshot = self.registry.load();
        match &self.limit {
            Some((seen, limit)) if Arc::ptr_eq(seen, &snapshot) => *limit,
            _ => {
                let limit = batch_limit(snapshot.widest_match());
                self.limit = Some((snapshot, limit));
                limit
            }
        }
    }

    /// Routes a batch, then persists its callbacks and mapping changes and queues the
    /// callbacks. `false` when the relay stopped first.
    async fn handle(&mut self, batch: &[BusMessage]) -> bool {
        let routed = self.route(batch);
        self.persist(batch, routed).await
    }

    /// [`Self::handle`] for resumed messages from `offset` on, without the callbacks hooks
    /// already have.
    async fn handle_resumed(
        &mut self,
        batch: &[BusMessage],
        queued: &AlreadyQueued,
        offset: usize,
    ) -> bool {
        let mut routed = self.route(batch);
        let before = routed.callbacks.len();
        routed.callbacks.retain(|c| {
            let source = batch.get(c.message).map_or(0, |m| m.source);
            !queued.has(c.hook.id, source, offset + c.message)
        });
        let skipped = before - routed.callbacks.len();
        if skipped > 0 {
            tracing::info!(
                callbacks = skipped,
                "not queued again: the last holder queued them but died before its cursors moved"
            );
            self.metrics.fleet.requeues_avoided.inc_by(skipped as u64);
        }
        self.persist(batch, routed).await
    }

    /// Persists what routing `batch` came to and queues its callbacks.
    async fn persist(&mut self, batch: &[BusMessage], mut routed: Routed) -> bool {
        let mut spans = self.traces.as_deref().map(|traces| {
            super::traced::open(
                traces,
                batch,
                &mut routed,
                &self.sources,
                self.destinations.as_ref(),
            )
        });
        for (i, skip) in &routed.skipped {
            let (source, channel) = batch.get(*i).map_or((0, ""), |m| (m.source, &*m.channel));
            let source = self.sources.name(source);
            let trace_id = spans.as_ref().and_then(|s| s.trace_id(*i));
            tracing::debug!(%source, channel, error = %skip, trace_id, "skipping a bus message");
            self.metrics.bus.skip(&source, skip.reason());
        }
        for event in routed.events.iter().filter(|e| !e.filtered) {
            self.metrics
                .bus
                .mapped(&self.sources.name(event.source), &event.id);
        }
        self.metrics
            .plugin_dropped
            .inc_by(routed.dropped.len() as u64);
        let mut state = redis::pipe();
        {
            for ((processor, keys), c) in self
                .router
                .processors_mut()
                .iter_mut()
                .zip(&self.keys)
                .zip(&self.conferences)
            {
                persist::add_writes(&mut state, keys, &processor.mappings.take_writes());
                let changes = c.lock().unwrap_or_else(|e| e.into_inner()).take_changes();
                conference::persist::add_changes(&mut state, keys, &changes);
            }
        }
        // A traced message's statements and destination messages keep their place in its
        // trace, as its callbacks do.
        let traces = self.traces.clone();
        let events = &routed.events;
        let mut trace = |i: usize, kind: &str, name: &str| {
            let (traces, spans) = traces.as_deref().zip(spans.as_mut())?;
            let event = events.get(i).map_or(String::new(), |e| e.id.clone());
            spans.output(
                traces,
                i,
                vec![
                    opentelemetry::KeyValue::new("hookrelay.output", format!("{kind}:{name}")),
                    opentelemetry::KeyValue::new("hookrelay.event.id", event),
                ],
            )
        };
        if let Some(xapi) = &mut self.xapi {
            let mut conn = self.dispatcher.conn();
            xapi.add(events, &mut conn, &mut state, &mut trace).await;
        }
        if let Some(destinations) = &mut self.destinations {
            destinations.add(events, &mut state, &mut trace);
        }
        let on_cluster = self.dispatcher.on_cluster();
        let commit = self.cursors.as_mut().and_then(|cursors| {
            let mut writes = redis::pipe();
            let mark = cursors.advance(batch, &self.sources, &mut writes);
            (!mark.is_empty()).then(|| Commit {
                writes,
                // Only a cluster writes marks (elsewhere one transaction holds the batch).
                mark: on_cluster.then(|| mark.text()),
            })
        });
        let commit = self.with_taken(batch, commit);
        if self.fence.check_or_stop().is_err() {
            if let Some(spans) = spans {
                spans.close(false);
            }
            return false;
        }
        let arrivals: Vec<std::time::Instant> = batch.iter().map(|m| m.arrived).collect();
        let accepted = self
            .dispatcher
            .accept(state, commit, routed.callbacks, &arrivals)
            .await;
        if accepted && let Some(xapi) = &mut self.xapi {
            xapi.wake();
        }
        if accepted && let Some(destinations) = &mut self.destinations {
            destinations.wake();
        }
        if let Some(spans) = spans {
            spans.close(accepted);
        }
        accepted
    }

    /// Routes `batch` with the hooks and plugins in force now (the plugins only say which
    /// callbacks wait for them).
    fn route(&mut self, batch: &[BusMessage]) -> Routed {
        let snapshot = self.registry.load();
        if self
            .last_snapshot
            .as_ref()
            .is_some_and(|last| !Arc::ptr_eq(last, &snapshot))
        {
            self.dispatcher.prune();
            self.router.forget_hooks(|id| snapshot.get(id).is_some());
        }
        self.last_snapshot = Some(snapshot.clone());
        let plugins = self.plugins.current();
        let messages = batch.iter().map(|m| (m.source, &m.payload));
        self.router.route_sourced(messages, &snapshot, &plugins)
    }

    /// Removes the streams of hooks whose queue has been empty and idle for
    /// [`tidy::IDLE`] (a fan-out to many hooks leaves none behind).
    async fn drop_idle_queues(&self) {
        let hooks: Vec<HookId> = self.registry.load().all().map(|h| h.id).collect();
        let mut conn = self.dispatcher.conn();
        match tidy::drop_idle(&mut conn, &hooks, tidy::IDLE).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(streams = n, "removed the empty streams of idle hooks"),
            Err(e) => tracing::debug!(error = %e, "cannot remove the empty streams of idle hooks"),
        }
    }

    /// Prunes the queues of removed hooks, expires mappings, and counts; returns the queues'
    /// depths (none when delivery is spread over a fleet: the holders of the hooks say them).
    fn sweep(&mut self) -> Option<Vec<(HookId, usize)>> {
        let depths = self.dispatcher.prune();
        let used = self.dispatcher.budget().used();
        self.metrics
            .queue_bytes
            .set(i64::try_from(used).unwrap_or(i64::MAX));
        let (mut meetings, mut users) = (0, 0);
        for (i, processor) in self.router.processors_mut().iter_mut().enumerate() {
            let mappings = &mut processor.mappings;
            let timeout = mappings.timeout_ms();
            let expired = mappings.expire(now_ms());
            if let Some(c) = self.conferences.get(i) {
                c.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .expire(now_ms(), timeout);
            }
            if expired > 0 {
                let source = self.sources.name(SourceId::try_from(i).unwrap_or(0));
                tracing::info!(%source, expired, "dropped inactive meeting mappings");
            }
            meetings += mappings.meeting_count();
            users += mappings.user_count();
        }
        self.metrics.meeting_mappings.set(meetings as i64);
        self.metrics.user_mappings.set(users as i64);
        depths
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn batches_shrink_as_hooks_grow() {
        use super::{BATCH, batch_limit};
        assert_eq!(batch_limit(0), BATCH);
        assert_eq!(batch_limit(4), BATCH);
        assert_eq!(batch_limit(10), 102);
        assert_eq!(batch_limit(100), 10);
        assert_eq!(batch_limit(100_000), 1);
    }
}

//! The way from bus messages to callbacks, one function for the relay and for
//! `hookrelay replay`: process each message (decode, map, state changes), match its events
//! against the hooks, run the plugin chain over each (event, hook) pair, and timestamp what
//! remains. Pure apart from the plugins' own state: no Redis, no network.
//!
//!
//! Plugins run here for `hookrelay replay`; the relay defers them ([`MessageRouter::deferring`]): a
//! pair that a plugin takes becomes a callback that keeps what the chain needs
//! ([`Deferred`]), and its hook's worker runs the chain when it sends it, so that a slow plugin
//! holds back only the hooks in its scope.
//!
//! Timestamps: a callback's `timestamp` is the wall-clock millisecond at which the relay made
//! it, raised to one more than the hook's previous callback where needed, so that each hook's
//! timestamps strictly increase (they are its queue's stream ids) and are never behind the clock
//! when they are given. Only callbacks get one: an event no hook wants takes none, nor does one
//! the plugin chain drops here (one it drops at sending time has taken its timestamp).

use crate::base::ids::HookId;

use std::{collections::HashMap, sync::Arc};

use crate::{
    base::sources::SourceId,
    event::{Event, Payload, Processor, Skip},
    hooks::{Hook, Snapshot, matcher},
    plugin_host::{Deferred, PluginSet, Verdict},
    tenants::Tenants,
};

/// One callback to send.
#[derive(Debug, Clone)]
pub(crate) struct Callback {
    pub(crate) hook: Arc<Hook>,
    pub(crate) event: Arc<Event>,
    /// What the hook gets: the processed event, the bus message (raw hooks), or what the
    /// plugin chain made of them.
    pub(crate) payload: Arc<Payload>,
    /// The callback's `timestamp` (milliseconds); also its id in the hook's queue.
    pub(crate) ts: u64,
    /// Index of its bus message in the routed batch.
    pub(crate) message: usize,
    /// Set when a plugin takes it and the chain runs at sending time: what it needs of the
    /// event besides `payload`.
    pub(crate) chain: Option<Deferred>,
    /// A redelivery: the timestamp of the callback it sends again.
    pub(crate) original: Option<u64>,
    /// Its place in its message's trace, set by the processing stage when traced.
    pub(crate) trace: Option<crate::traces::TraceParent>,
}

/// What a batch of messages came to.
#[derive(Debug, Default)]
pub(crate) struct Routed {
    /// In bus order, and within one message in event order.
    pub(crate) callbacks: Vec<Callback>,
    /// Every event made, in order (for counting).
    pub(crate) events: Vec<Arc<Event>>,
    /// Messages that made no event: (index in the batch, why).
    pub(crate) skipped: Vec<(usize, Skip)>,
    /// Hook ids of the callbacks the plugin chain dropped, one entry per callback.
    pub(crate) dropped: Vec<HookId>,
    /// With [`MessageRouter::timed`], one per message, in order: for its trace's spans.
    pub(crate) timings: Vec<MessageTiming>,
}

/// When a message was taken up, processed and matched, and what it made.
#[derive(Debug, Clone)]
pub(crate) struct MessageTiming {
    pub(crate) started: std::time::SystemTime,
    pub(crate) processed: std::time::SystemTime,
    pub(crate) matched: std::time::SystemTime,
    /// Its events: a range of [`Routed::events`].
    pub(crate) events: std::ops::Range<usize>,
    /// How many callbacks it made.
    pub(crate) callbacks: usize,
}

/// Per-hook callback timestamps.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    last: HashMap<HookId, u64>,
}

impl Clock {
    /// The timestamp hook `hook`'s next callback gets at wall-clock time `now`.
    fn next(&self, hook: HookId, now: u64) -> u64 {
        self.last.get(&hook).map_or(now, |last| now.max(last + 1))
    }

    /// Gives hook `hook`'s next callback its timestamp at wall-clock time `now`.
    pub(crate) fn stamp(&mut self, hook: HookId, now: u64) -> u64 {
        let ts = self.next(hook, now);
        self.last.insert(hook, ts);
        ts
    }

    /// Makes later timestamps of `hook` exceed `ts` (the last one its queue ever held).
    pub(crate) fn observe(&mut self, hook: HookId, ts: u64) {
        let last = self.last.entry(hook).or_insert(ts);
        *last = (*last).max(ts);
    }

    /// Forgets hooks for which `live` is false.
    pub(crate) fn retain(&mut self, live: impl Fn(HookId) -> bool) {
        self.last.retain(|id, _| live(*id));
    }
}

/// Routes bus messages to the hooks' callbacks. The state the way needs: one processor (id
/// mappings) per source and the per-hook clock. Owned by one task, so that messages are
/// routed strictly in bus order.
pub(crate) struct MessageRouter {
    /// Indexed by source.
    processors: Vec<Processor>,
    clock: Clock,
    /// Leave the plugin chain to the hooks' workers (the relay) instead of running it here.
    defer_plugins: bool,
    /// The time messages are processed at (milliseconds since the epoch); `None`: the clock.
    /// Test cases fix it, so that the events' timestamps are the same at every run.
    now: Option<u64>,
    /// The tenants whose hooks get their own meetings' events; none: every event is of no
    /// tenant (only the operator's hooks match it).
    tenants: Option<Arc<Tenants>>,
    /// Record each message's [`MessageTiming`] (traces are on).
    timed: bool,
}

impl MessageRouter {
    /// One source.
    pub(crate) fn new(processor: Processor) -> Self {
        Self::with_sources(vec![processor])
    }

    /// `processors[i]` processes source `i`'s messages; at least one.
    pub(crate) fn with_sources(processors: Vec<Processor>) -> Self {
        Self {
            processors,
            clock: Clock::default(),
            defer_plugins: false,
            now: None,
            tenants: None,
            timed: false,
        }
    }

    /// This router, its hooks' callbacks timestamped after those `clock` saw (the queues' last,
    /// at a start).
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Processes every message at `now` (milliseconds since the epoch) rather than at the
    /// clock's time: test cases, whose events must be the same at every run.
    pub(crate) fn at(&mut self, now: u64) {
        self.now = Some(now);
    }

    /// The processors, by source.
    pub(crate) fn processors(&self) -> &[Processor] {
        &self.processors
    }

    /// The processors, by source, to persist or expire their mappings.
    pub(crate) fn processors_mut(&mut self) -> &mut [Processor] {
        &mut self.processors
    }

    /// The id the next source added gets; `None` when there are as many sources as ids.
    pub(crate) fn next_source(&self) -> Option<SourceId> {
        SourceId::try_from(self.processors.len()).ok()
    }

    /// Adds the processor of a new source (an edge that joined), whose id is
    /// [`MessageRouter::next_source`].
    pub(crate) fn add_source(&mut self, processor: Processor) {
        self.processors.push(processor);
    }

    /// Gives hook `hook`'s next callback, made outside the bus (a notice, a redelivery), its
    /// timestamp at wall-clock time `now`.
    pub(crate) fn stamp(&mut self, hook: HookId, now: u64) -> u64 {
        self.clock.stamp(hook, now)
    }

    /// Forgets the timestamps of hooks for which `live` is false.
    pub(crate) fn forget_hooks(&mut self, live: impl Fn(HookId) -> bool) {
        self.clock.retain(live);
    }

    /// This router, matching tenants' hooks to their own meetings' events.
    pub(crate) fn with_tenants(mut self, tenants: Arc<Tenants>) -> Self {
        self.tenants = Some(tenants);
        self
    }

    /// This router, recording when each message was processed and matched ([`Routed::timings`]).
    pub(crate) fn timed(mut self) -> Self {
        self.timed = true;
        self
    }

    /// This router, leaving the plugin chain to the hooks' workers: a callback a plugin takes
    /// is routed unchanged, with what the chain will need ([`Callback::chain`]).
    pub(crate) fn deferring(mut self) -> Self {
        self.defer_plugins = true;
        self
    }

    /// Routes `messages`, all of the first source, in order to the hooks of `snapshot`,
    /// through `plugins`.
    pub(crate) fn route<'a>(
        &mut self,
        messages: impl IntoIterator<Item = &'a Arc<str>>,
        snapshot: &Snapshot,
        plugins: &PluginSet,
    ) -> Routed {
        self.route_sourced(messages.into_iter().map(|m| (0, m)), snapshot, plugins)
    }

    /// Routes `(source, message)` pairs in order to the hooks of `snapshot`, through
    /// `plugins`. Each source's messages go through its own processor, so that two servers'
    /// internal ids never mix; hooks match by external meeting id, whichever server hosts it.
    pub(crate) fn route_sourced<'a>(
        &mut self,
        messages: impl IntoIterator<Item = (SourceId, &'a Arc<str>)>,
        snapshot: &Snapshot,
        plugins: &PluginSet,
    ) -> Routed {
        let mut out = Routed::default();
        let tenants = self.tenants.as_ref().map(|t| t.load());
        for (i, (source, msg)) in messages.into_iter().enumerate() {
            let started = self.timed.then(std::time::SystemTime::now);
            let (events_from, callbacks_from) = (out.events.len(), out.callbacks.len());
            let processed = self.route_one(
                i,
                (source, msg),
                snapshot,
                plugins,
                tenants.as_deref(),
                &mut out,
            );
            if let Some(started) = started {
                let matched = std::time::SystemTime::now();
                out.timings.push(MessageTiming {
                    started,
                    processed: processed.unwrap_or(matched),
                    matched,
                    events: events_from..out.events.len(),
                    callbacks: out.callbacks.len() - callbacks_from,
                });
            }
        }
        out
    }

    /// Routes message `i` into `out`; when timed, when it was processed.
    fn route_one(
        &mut self,
        i: usize,
        (source, msg): (SourceId, &Arc<str>),
        snapshot: &Snapshot,
        plugins: &PluginSet,
        tenants: Option<&crate::tenants::View>,
        out: &mut Routed,
    ) -> Option<std::time::SystemTime> {
        let n = self.processors.len();
        let Some(processor) = self.processors.get_mut(usize::from(source)) else {
            tracing::error!(
                source,
                sources = n,
                "a message of an unknown source is skipped"
            );
            out.skipped.push((i, Skip::Unmapped));
            return None;
        };
        let now = self.now.unwrap_or_else(crate::base::time::now_ms);
        let events = match processor.process(msg, now) {
            Ok(events) => events,
            Err(skip) => {
                out.skipped.push((i, skip));
                return None;
            }
        };
        let processed = self.timed.then(std::time::SystemTime::now);
        for event in events {
            let event = Arc::new(event);
            if event.filtered {
                out.events.push(event);
                continue;
            }
            let tenant = event
                .tenant
                .as_ref()
                .zip(tenants.as_ref())
                .and_then(|(t, view)| view.resolve(t.id.as_deref(), t.name.as_deref()));
            let hooks = matcher::matching(snapshot, matcher::Wanted::of(&event, tenant));
            for hook in hooks {
                // A raw hook gets nothing for an event the relay synthesized.
                if event.payload(hook.get_raw).is_none() {
                    continue;
                }
                let ts = self.clock.next(hook.id, now);
                let (payload, chain) = if self.defer_plugins {
                    let chain = plugins
                        .takes(&event, hook)
                        .then(|| Deferred::of(&event, hook.get_raw));
                    match event.payload(hook.get_raw) {
                        Some(p) => (p.clone(), chain),
                        None => continue,
                    }
                } else {
                    let Some(payload) = apply(plugins, &event, hook, ts) else {
                        out.dropped.push(hook.id);
                        continue;
                    };
                    (payload, None)
                };
                self.clock.last.insert(hook.id, ts);
                out.callbacks.push(Callback {
                    hook: hook.clone(),
                    event: event.clone(),
                    payload,
                    ts,
                    message: i,
                    chain,
                    original: None,
                    trace: None,
                });
            }
            out.events.push(event);
        }
        processed
    }
}

/// Runs the plugin chain over one pair; `None` when it drops the callback. A panic in the host
/// (never in a plugin: those are traps) costs this callback only and counts as a failure of the
/// chain, so it fails closed.
pub(crate) fn apply(
    plugins: &PluginSet,
    event: &Arc<Event>,
    hook: &Hook,
    ts: u64,
) -> Option<Arc<Payload>> {
    if plugins.is_empty() {
        return event.payload(hook.get_raw).cloned();
    }
    let verdict =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plugins.apply(event, hook, ts)))
            .unwrap_or_else(|_| {
                tracing::error!(hook_id = hook.id.0, event = %event.id, "the plugin chain panicked; the callback is dropped");
                Verdict::Drop
            });
    verdict.payload(event, hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        event::{EventFilter, Mappings},
        hooks::Registry,
    };

    fn hook(id: u64, get_raw: bool, meeting: Option<&str>) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: format!("http://h/{id}"),
            meeting_id: meeting.map(String::from),
            event_ids: None,
            get_raw,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        }
    }

    fn msg(text: serde_json::Value) -> Arc<str> {
        text.to_string().into()
    }

    fn joined(uid: &str) -> Arc<str> {
        msg(serde_json::json!({
            "envelope": {"name": "UserJoinedMeetingEvtMsg", "routing": {"meetingId": "m"}},
            "core": {"header": {"name": "UserJoinedMeetingEvtMsg", "meetingId": "m", "userId": uid},
                     "body": {"extId": uid, "name": uid}}}))
    }

    fn emoji(uid: &str, emoji: &str) -> Arc<str> {
        msg(serde_json::json!({
            "envelope": {"name": "UserEmojiChangedEvtMsg", "routing": {"meetingId": "m"}},
            "core": {"header": {"name": "UserEmojiChangedEvtMsg", "meetingId": "m", "userId": uid},
                     "body": {"emoji": emoji}}}))
    }

    fn ended() -> Arc<str> {
        msg(serde_json::json!({
            "envelope": {"name": "MeetingDestroyedEvtMsg"},
            "core": {"header": {"name": "MeetingDestroyedEvtMsg"}, "body": {"meetingId": "m"}}}))
    }

    fn router() -> MessageRouter {
        MessageRouter::new(Processor::new(
            Mappings::new(u64::MAX, false),
            EventFilter::default(),
        ))
    }

    fn snapshot(hooks: Vec<Hook>) -> Arc<Snapshot> {
        let r = Registry::default();
        r.replace_all(hooks);
        r.load()
    }

    #[test]
    fn raw_hooks_get_each_bus_message_once_and_nothing_synthesized() {
        let snap = snapshot(vec![hook(1, false, None), hook(2, true, None)]);
        let messages = [joined("a"), emoji("a", "raiseHand"), ended()];
        let routed = router().route(&messages, &snap, &PluginSet::default());
        let got = |id: HookId| {
            routed
                .callbacks
                .iter()
                .filter(|c| c.hook.id == id)
                .map(|c| (c.event.id.as_str(), c.payload.text().to_string()))
                .collect::<Vec<_>>()
        };
        let processed: Vec<&str> = got(HookId(1)).iter().map(|(id, _)| *id).collect();
        assert_eq!(
            processed,
            [
                "user-joined",
                "user-emoji-changed",
                "user-raise-hand-changed",
                "user-left",
                "meeting-ended"
            ]
        );
        let raw = got(HookId(2));
        assert_eq!(
            raw.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
            messages.iter().map(|m| &**m).collect::<Vec<_>>(),
            "each bus message once, in order"
        );
    }

    #[test]
    fn timestamps_are_per_hook_strictly_increasing_and_only_for_callbacks() {
        let snap = snapshot(vec![
            hook(1, false, None),
            hook(2, false, Some("elsewhere")),
        ]);
        let mut r = router();
        r.clock.observe(HookId(1), u64::MAX / 2);
        let messages: Vec<Arc<str>> = (0..50).map(|i| joined(&format!("u{i}"))).collect();
        let before = crate::base::time::now_ms();
        let routed = r.route(&messages, &snap, &PluginSet::default());
        let ts: Vec<u64> = routed.callbacks.iter().map(|c| c.ts).collect();
        assert_eq!(ts.len(), 50, "hook 2 is bound to another meeting");
        assert_eq!(ts[0], u64::MAX / 2 + 1, "after the last one its queue held");
        assert!(ts.windows(2).all(|w| w[1] == w[0] + 1));
        // A hook that never got anything starts at the clock, whatever other hooks did.
        let snap = snapshot(vec![hook(1, false, None), hook(3, false, None)]);
        let routed = r.route(&[joined("x")], &snap, &PluginSet::default());
        let three = routed
            .callbacks
            .iter()
            .find(|c| c.hook.id == HookId(3))
            .unwrap();
        assert!(three.ts >= before && three.ts <= crate::base::time::now_ms());
        assert!(
            !r.clock.last.contains_key(&HookId(2)),
            "no callback, no timestamp"
        );
    }
}

//! What each hook got, for people: its worker records every attempt here (in memory, no I/O)
//! and one flusher task writes what was recorded to the store for all hooks in one pipeline a
//! round, off the hot path (and, in a second, the callbacks to keep for [`retain`]): each hook's last `delivery.attempt_log` attempts (a list of JSON
//! records, newest first) and its delivery state (a hash: last success, last failure, failures
//! in a row, when it is removed if they go on, who delivers it). Both are kept
//! [`KEPT_FOR`] after their last write, so a hook removed after failures can still be looked
//! at. [`read`] reads them back, from any instance of a fleet.

mod read;

pub(crate) use read::{HookState, State, attempts, oldest_queued, removed_hooks, states};

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    journal::Entry,
    retain::{self, Bounds},
};
use crate::{
    base::{
        ids::HookId,
        redis_keys::{REMOVED_HOOKS, attempts_key, status_key},
        sources::SourceTable,
        time::now_ms,
    },
    hooks::Registry,
    metrics::Metrics,
    store_conn::StoreConn,
};

/// How long a hook's attempts and state stay in the store after their last write.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 3600);
/// Recorded attempts are written at most this often, together.
const ROUND: Duration = Duration::from_millis(250);
/// An error's text is cut to this many bytes, so that a record stays within 512 bytes.
const MAX_ERROR: usize = 200;
/// An event id is cut to this many bytes.
const MAX_EVENT: usize = 64;

/// One attempt to send a callback, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptRecord {
    /// When it ended (ms since the epoch).
    pub(crate) at: u64,
    /// The event id (`user-joined`, ...).
    pub(crate) event: String,
    /// The callback's `timestamp`.
    pub(crate) ts: u64,
    /// 1 for the first try of this callback, 2 for its first retry, ...
    pub(crate) attempt: u32,
    /// The receiver's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<u16>,
    /// What went wrong, when it failed (`HTTP 500`, `timeout`, `connect: ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// From the request's start to its end.
    pub(crate) latency_ms: f64,
    /// The trace of the callback's bus message, when it was traced (`[tracing]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) trace_id: Option<String>,
}

impl AttemptRecord {
    /// Whether the receiver took it (a 2xx).
    pub(crate) fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Cuts `text` to at most `max` bytes, control characters made spaces (each would take six
/// in JSON).
fn cut(text: &mut String, max: usize) {
    if text.len() > max {
        let mut at = max;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
    }
    if text.contains(char::is_control) {
        *text = text.replace(char::is_control, " ");
    }
}

/// What was recorded of one hook since the last round.
#[derive(Default)]
struct News {
    /// The round's last attempt records, oldest first (made JSON only when written: a busy
    /// hook records far more in a round than the log keeps).
    attempts: std::collections::VecDeque<AttemptRecord>,
    last_ok: Option<u64>,
    /// Failures after the last success of this round (all of them when there was none).
    failures: u64,
    /// The last failure: when, and what.
    last_failure: Option<(u64, String)>,
    /// `Some(None)`: no removal due (it succeeded); `Some(Some(t))`: removed at `t` if the
    /// failures go on.
    removal_due: Option<Option<u64>>,
    /// Removed after failures: when, and its callback URL.
    removed: Option<(u64, String)>,
}

/// What the workers recorded since the last round.
#[derive(Default)]
struct Pending {
    hooks: HashMap<HookId, News>,
    /// Callbacks to keep, by callback URL, oldest first.
    kept: HashMap<String, Vec<Entry>>,
    /// How many `kept` holds.
    kept_count: usize,
}

/// How sent callbacks are kept (`delivery.retain`).
pub(crate) struct Retention {
    /// The window, and the bytes of all URLs together.
    pub(crate) bounds: Bounds,
    /// The sources' names, stored with each callback.
    pub(crate) sources: Arc<SourceTable>,
    /// The hooks: each of their URLs keeps an equal share of the bytes.
    pub(crate) registry: Arc<Registry>,
}

/// Most callbacks waiting to be kept per URL while the store cannot be written.
const MAX_PENDING_KEPT: usize = 10_000;
/// With this many callbacks waiting to be kept, a round is written at once (a busy relay
/// holds fewer payloads, and builds smaller pipelines).
const FULL_ROUND: usize = 2_048;

/// Shared by the workers (record) and the flusher (write).
pub(crate) struct Insight {
    pending: Mutex<Pending>,
    wake: Notify,
    /// A round is full: write it now.
    full: Notify,
    /// Attempts kept per hook; 0: none (the state is kept all the same).
    keep: usize,
    /// This instance's name, in a fleet: who delivers the hook.
    instance: Option<String>,
    /// `None`: sent callbacks are not kept.
    retention: Option<Retention>,
    /// Workers alive: at a stop, what they record until they end is written too.
    workers: std::sync::atomic::AtomicUsize,
}

/// A worker's registration with [`Insight`], while it lives.
pub(crate) struct WorkerRegistration(Arc<Insight>);

impl Drop for WorkerRegistration {
    fn drop(&mut self) {
        self.0
            .workers
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.0.wake.notify_one();
    }
}

impl Insight {
    pub(crate) fn new(
        keep: usize,
        instance: Option<String>,
        retention: Option<Retention>,
    ) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            full: Notify::new(),
            keep,
            instance,
            retention,
            workers: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Counts a worker alive until the returned value is dropped.
    pub(crate) fn worker(self: &Arc<Self>) -> WorkerRegistration {
        self.workers
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        WorkerRegistration(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn news<R>(&self, hook: HookId, f: impl FnOnce(&mut News) -> R) -> R {
        let mut p = self.lock();
        let r = f(p.hooks.entry(hook).or_default());
        drop(p);
        self.wake.notify_one();
        r
    }

    /// Keeps `entries` sent (or left queued by a hook removed after failures) to `url` for
    /// `redeliver`. A redelivery is not kept again: its original is.
    pub(crate) fn keep(&self, url: &str, entries: impl IntoIterator<Item = Entry>) {
        if self.retention.is_none() {
            return;
        }
        let mut p = self.lock();
        let Pending {
            kept, kept_count, ..
        } = &mut *p;
        let list = match kept.get_mut(url) {
            Some(l) => l,
            None => kept.entry(url.to_string()).or_default(),
        };
        for entry in entries {
            if entry.original.is_some() {
                continue;
            }
            if list.len() >= MAX_PENDING_KEPT {
                list.remove(0);
            } else {
                *kept_count += 1;
            }
            list.push(entry);
        }
        let full = *kept_count >= FULL_ROUND;
        drop(p);
        self.wake.notify_one();
        if full {
            self.full.notify_one();
        }
    }

    /// Keeps `entry`, just delivered to `url`, for `redeliver`: called before its attempt is
    /// recorded, so that a round never shows the attempt of a callback it did not keep.
    pub(crate) fn keep_sent(&self, url: &str, entry: &Entry) {
        if self.retention.is_some() && entry.original.is_none() {
            self.keep(url, [entry.clone()]);
        }
    }

    /// The most bytes kept per URL now; `None` when sent callbacks are not kept.
    pub(crate) fn retained_bytes(&self) -> Option<u64> {
        self.retention
            .as_ref()
            .map(|r| r.bounds.max_bytes / r.registry.load().url_count().max(1) as u64)
    }

    /// Records an attempt of `hook`; `removal_due`, after a failure, is when the hook is
    /// removed if the failures go on (`None`: never, a permanent hook).
    pub(crate) fn attempt(
        &self,
        hook: HookId,
        mut record: AttemptRecord,
        removal_due: Option<u64>,
    ) {
        cut(&mut record.event, MAX_EVENT);
        if let Some(e) = &mut record.error {
            cut(e, MAX_ERROR);
        }
        let keep = self.keep;
        self.news(hook, |n| {
            match &record.error {
                None => {
                    n.last_ok = Some(record.at);
                    n.failures = 0;
                    n.removal_due = Some(None);
                }
                Some(e) => {
                    n.failures += 1;
                    n.last_failure = Some((record.at, e.clone()));
                    n.removal_due = Some(removal_due);
                }
            }
            if keep > 0 {
                if n.attempts.len() >= keep {
                    n.attempts.pop_front();
                }
                n.attempts.push_back(record);
            }
        });
    }

    /// Records that `hook` (with `url`) was removed after failures.
    pub(crate) fn removed(&self, hook: HookId, url: &str) {
        let at = now_ms();
        self.news(hook, |n| n.removed = Some((at, url.to_string())));
    }

    fn take(&self) -> Pending {
        std::mem::take(&mut *self.lock())
    }

    /// The commands that write `news` (each hook's keys share its slot).
    fn commands(&self, news: HashMap<HookId, News>, now: u64) -> redis::Pipeline {
        let ttl = KEPT_FOR.as_millis() as u64;
        let mut pipe = redis::pipe();
        for (hook, n) in news {
            let attempts: Vec<String> = (n.attempts.iter())
                .filter_map(|r| serde_json::to_string(r).ok())
                .collect();
            if !attempts.is_empty() {
                let key = attempts_key(hook);
                pipe.lpush(&key, &attempts).ignore();
                pipe.ltrim(&key, 0, self.keep as isize - 1).ignore();
                pipe.pexpire(&key, ttl as i64).ignore();
            }
            let key = status_key(hook);
            let mut fields: Vec<(&str, String)> = Vec::new();
            if let Some(i) = &self.instance {
                fields.push(("instance", i.clone()));
            }
            if let Some(t) = n.last_ok {
                fields.push(("last_ok", t.to_string()));
                fields.push(("failures_in_row", n.failures.to_string()));
            } else if n.failures > 0 {
                pipe.hincr(&key, "failures_in_row", n.failures).ignore();
            }
            if let Some((t, e)) = n.last_failure {
                fields.push(("last_failure", t.to_string()));
                fields.push(("last_error", e));
            }
            match n.removal_due.filter(|_| n.removed.is_none()) {
                Some(Some(t)) => fields.push(("removal_due", t.to_string())),
                Some(None) => {
                    pipe.hdel(&key, "removal_due").ignore();
                }
                None => {}
            }
            if let Some((t, url)) = n.removed {
                fields.push(("removed", t.to_string()));
                fields.push(("url", url));
                pipe.hdel(&key, "removal_due").ignore();
                pipe.zadd(REMOVED_HOOKS, hook, t).ignore();
            }
            if !fields.is_empty() {
                pipe.hset_multiple(&key, &fields).ignore();
            }
            pipe.pexpire(&key, ttl as i64).ignore();
        }
        pipe.zrembyscore(REMOVED_HOOKS, 0, now.saturating_sub(ttl))
            .ignore();
        pipe
    }

    /// Writes what the workers record, a round at a time, until the relay stops (then once
    /// more). Nothing waits for it: a write that fails is logged and counted, and what it
    /// held is lost (the callbacks are not).
    pub(crate) async fn run(
        self: Arc<Self>,
        conn: StoreConn,
        metrics: Arc<Metrics>,
        token: CancellationToken,
    ) {
        loop {
            if token.is_cancelled() {
                // Stopping: the workers finish their attempts in flight; look again soon.
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
            } else {
                tokio::select! {
                    () = self.wake.notified() => {}
                    () = token.cancelled() => {}
                }
                // Let a round's attempts gather.
                tokio::select! {
                    () = tokio::time::sleep(ROUND) => {}
                    () = self.full.notified() => {}
                    () = token.cancelled() => {}
                }
            }
            let stopping = token.is_cancelled()
                && self.workers.load(std::sync::atomic::Ordering::Acquire) == 0;
            let Pending { hooks, kept, .. } = self.take();
            let now = now_ms();
            // The callbacks kept first: once an attempt shows, its callback can be sent again.
            if let Some(r) = &self.retention
                && !kept.is_empty()
            {
                let share = Bounds {
                    max_bytes: r.bounds.max_bytes / r.registry.load().url_count().max(1) as u64,
                    ..r.bounds
                };
                let mut pipe = redis::pipe();
                for (url, kept) in &kept {
                    retain::add(&mut pipe, url, kept, share, &r.sources, now);
                }
                if let Err(e) = retain::send(&conn, &pipe).await {
                    metrics.insight_write_failures.inc();
                    tracing::warn!(error = %e, "cannot keep the callbacks sent for redelivery; these cannot be sent again");
                }
            }
            if !hooks.is_empty() {
                let pipe = self.commands(hooks, now);
                if let Err(e) = pipe.query_async::<()>(&mut conn.clone()).await {
                    metrics.insight_write_failures.inc();
                    tracing::warn!(error = %e, "cannot write the hooks' delivery attempts to the store; these are lost (the callbacks are not)");
                }
            }
            if stopping {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(at: u64, error: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            at,
            event: "user-joined".into(),
            ts: at,
            attempt: 1,
            status: error.is_none().then_some(200),
            error: error.map(String::from),
            latency_ms: 1.5,
            trace_id: None,
        }
    }

    #[test]
    fn a_round_keeps_the_newest_attempts_and_the_failures_after_the_last_success() {
        let i = Insight::new(2, None, None);
        let h = HookId(3);
        i.attempt(h, attempt(1, Some("HTTP 500")), Some(100));
        i.attempt(h, attempt(2, None), Some(100));
        i.attempt(h, attempt(3, Some("timeout")), Some(90));
        i.attempt(h, attempt(4, Some("timeout")), Some(95));
        let news = i.take().hooks;
        let n = &news[&h];
        assert_eq!(n.attempts.len(), 2, "at most `keep` a round");
        assert_eq!(n.attempts[1].at, 4);
        assert_eq!(n.last_ok, Some(2));
        assert_eq!(n.failures, 2);
        assert_eq!(n.last_failure, Some((4, "timeout".to_string())));
        assert_eq!(n.removal_due, Some(Some(95)));
        assert!(i.take().hooks.is_empty());
    }

    #[test]
    fn a_long_error_is_cut_and_a_record_stays_small() {
        let i = Insight::new(5, None, None);
        let long = "é\u{1}".repeat(1000);
        i.attempt(HookId(1), attempt(1, Some(&long)), None);
        let news = i.take().hooks;
        let json = serde_json::to_string(&news[&HookId(1)].attempts[0]).expect("JSON");
        assert!(json.len() < 512, "{}", json.len());
        let back: AttemptRecord = serde_json::from_str(&json).expect("a record");
        assert!(back.error.is_some_and(|e| e.len() <= MAX_ERROR));
    }

    #[test]
    fn with_no_log_only_the_state_is_kept() {
        let i = Insight::new(0, Some("a".into()), None);
        i.attempt(HookId(1), attempt(1, None), None);
        let news = i.take().hooks;
        assert!(news[&HookId(1)].attempts.is_empty());
        assert_eq!(news[&HookId(1)].last_ok, Some(1));
    }
}

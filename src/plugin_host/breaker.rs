//! A plugin's failures: how a failed call is classified, the breaker that marks a plugin failed
//! after `max_failures` in a row for a cool-down, and the plugin's metrics.

use std::time::{Duration, Instant};

use prometheus_client::metrics::{counter::Counter, histogram::Histogram};

use crate::metrics::{Metrics, PluginActionLabels, PluginErrorLabels, PluginLabel};

/// Why one call did not produce an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The deadline (wall-clock time) passed.
    Timeout,
    /// The instance asked for more memory than its limit.
    Memory,
    /// Any other trap (a panic, `unreachable`, a bad access), or an instance that could not be
    /// made again.
    Trap,
    /// `replace` with text that is not JSON.
    InvalidJson,
    /// Marked failed: not called until the cool-down ends.
    MarkedFailed,
    /// The plugin's file could not be loaded (and no earlier version runs).
    NotLoaded,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::InvalidJson => "invalid_json",
            Self::MarkedFailed => "marked_failed",
            Self::NotLoaded => "not_loaded",
        }
    }
}

/// Failures in a row, and the end of the cool-down while marked failed.
#[derive(Debug, Default)]
pub(super) struct Breaker {
    consecutive: u32,
    failed_until: Option<Instant>,
}

/// What [`Breaker::before_call`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Gate {
    /// Call the plugin.
    Call,
    /// Call it: its cool-down just ended.
    Reopened,
    /// Do not: it is marked failed.
    Closed,
}

impl Breaker {
    pub(super) fn before_call(&mut self, now: Instant) -> Gate {
        match self.failed_until {
            Some(until) if now < until => Gate::Closed,
            Some(_) => {
                self.failed_until = None;
                Gate::Reopened
            }
            None => Gate::Call,
        }
    }

    /// Records a success; true when it ends a run of failures.
    pub(super) fn succeeded(&mut self) -> bool {
        std::mem::take(&mut self.consecutive) > 0
    }

    /// Records a failure; true when it trips the breaker (marked failed until `now + cooldown`).
    pub(super) fn failed(&mut self, max_failures: u32, cooldown: Duration, now: Instant) -> bool {
        self.consecutive += 1;
        if self.consecutive < max_failures {
            return false;
        }
        self.consecutive = 0;
        self.failed_until = Some(now + cooldown);
        true
    }
}

/// A plugin's series, with the per-action counters made once so that a call looks no label up.
pub(super) struct PluginMetrics {
    name: String,
    keep: Counter,
    replace: Counter,
    drop: Counter,
    call_time: Histogram,
    metrics: std::sync::Arc<Metrics>,
}

impl PluginMetrics {
    pub(super) fn new(name: &str, metrics: std::sync::Arc<Metrics>) -> Self {
        let action = |a: &str| {
            metrics
                .plugin_calls
                .get_or_create(&PluginActionLabels {
                    plugin: name.to_string(),
                    action: a.to_string(),
                })
                .clone()
        };
        let call_time = metrics
            .plugin_call_seconds
            .0
            .get_or_create(&PluginLabel {
                plugin: name.to_string(),
            })
            .clone();
        Self {
            name: name.to_string(),
            keep: action("keep"),
            replace: action("replace"),
            drop: action("drop"),
            call_time,
            metrics,
        }
    }

    /// Records how long one call took.
    pub(super) fn timed(&self, took: Duration) {
        self.call_time.observe(took.as_secs_f64());
    }

    pub(super) fn keep(&self) {
        self.keep.inc();
    }

    pub(super) fn replace(&self) {
        self.replace.inc();
    }

    pub(super) fn drop(&self) {
        self.drop.inc();
    }

    /// Counts a failure in `hookrelay_plugin_errors` and hands it back.
    pub(super) fn failure(&self, f: Failure) -> Failure {
        self.metrics
            .plugin_errors
            .get_or_create(&PluginErrorLabels {
                plugin: self.name.clone(),
                kind: f.as_str().to_string(),
            })
            .inc();
        f
    }

    /// Sets `hookrelay_plugin_failed`.
    pub(super) fn set_failed(&self, failed: bool) {
        self.metrics
            .plugin_failed
            .get_or_create(&PluginLabel {
                plugin: self.name.clone(),
            })
            .set(i64::from(failed));
    }

    /// Drops the `hookrelay_plugin_failed` series (the plugin was removed).
    pub(super) fn forget(&self) {
        self.metrics.plugin_failed.remove(&PluginLabel {
            plugin: self.name.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_after_max_failures_in_a_row_and_reopens_after_the_cooldown() {
        let mut b = Breaker::default();
        let t0 = Instant::now();
        let cool = Duration::from_secs(10);
        assert!(!b.failed(3, cool, t0));
        assert!(!b.failed(3, cool, t0));
        assert!(b.succeeded(), "a success ends the run");
        assert!(!b.succeeded());
        assert!(!b.failed(3, cool, t0));
        assert!(!b.failed(3, cool, t0));
        assert!(b.failed(3, cool, t0), "third in a row");
        assert_eq!(b.before_call(t0 + Duration::from_secs(9)), Gate::Closed);
        assert_eq!(b.before_call(t0 + cool), Gate::Reopened);
        assert_eq!(b.before_call(t0 + cool), Gate::Call);
    }
}

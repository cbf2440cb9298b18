//! A circuit per receiver (host and port): when `after` attempts in a row to it failed in
//! transport (no connection, a timeout, a connection broken off), its hooks stop sending and
//! one probe at a time tries again, after 1 s, then twice as long each time up to `max_open`;
//! the first answer (any HTTP status: the host is reachable) closes it and every hook resumes.
//! A down host with 100 hooks then gets one attempt per interval, not 100. Pure state with a
//! clock given, so that its rules are tested without waiting.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

/// The first wait before a probe.
const FIRST_OPEN: Duration = Duration::from_secs(1);
/// How long a hook waits to look again while another's probe is in flight.
const PROBE_WAIT: Duration = Duration::from_millis(250);

/// What an attempt may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// The circuit is closed.
    Normal,
    /// The circuit is open and this attempt is its one probe.
    Probe,
}

/// What became of an attempt, for the circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Any HTTP answer: the receiver is reachable.
    Answer,
    /// No connection, a timeout, or a connection broken off.
    Unreachable,
}

/// What an attempt's record changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Opened,
    Closed,
}

#[derive(Debug)]
struct State {
    failures: u32,
    open_until: Option<Instant>,
    open_for: Duration,
    probing: bool,
}

/// One receiver's circuit.
#[derive(Debug)]
pub(crate) struct Circuit {
    after: u32,
    max_open: Duration,
    state: Mutex<State>,
}

impl Circuit {
    /// Opens after `after` unreachable attempts in a row (at least 1); probes at most
    /// `max_open` apart.
    pub(crate) fn new(after: u32, max_open: Duration) -> Self {
        Self {
            after: after.max(1),
            max_open: max_open.max(FIRST_OPEN),
            state: Mutex::new(State {
                failures: 0,
                open_until: None,
                open_for: FIRST_OPEN,
                probing: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an attempt may go now: `Err(wait)` while the circuit is open (look again
    /// after `wait`, which counts as no attempt).
    pub(crate) fn enter(&self, now: Instant) -> Result<Pass, Duration> {
        let mut s = self.lock();
        match s.open_until {
            None => Ok(Pass::Normal),
            Some(_) if s.probing => Err(PROBE_WAIT),
            Some(until) if now >= until => {
                s.probing = true;
                Ok(Pass::Probe)
            }
            Some(until) => Err(until - now),
        }
    }

    /// Records what became of an attempt that `enter` let through as `pass`.
    pub(crate) fn record(&self, pass: Pass, seen: Seen, now: Instant) -> Change {
        let mut s = self.lock();
        match (seen, pass) {
            (Seen::Answer, _) => {
                let was_open = s.open_until.is_some();
                *s = State {
                    failures: 0,
                    open_until: None,
                    open_for: FIRST_OPEN,
                    probing: false,
                };
                if was_open {
                    Change::Closed
                } else {
                    Change::None
                }
            }
            (Seen::Unreachable, Pass::Probe) => {
                s.probing = false;
                s.open_for = (s.open_for * 2).min(self.max_open);
                s.open_until = Some(now + s.open_for);
                Change::None
            }
            (Seen::Unreachable, Pass::Normal) => {
                s.failures = s.failures.saturating_add(1);
                if s.open_until.is_none() && s.failures >= self.after {
                    s.open_until = Some(now + s.open_for);
                    Change::Opened
                } else {
                    Change::None
                }
            }
        }
    }

    /// A probe let through did not finish (its task was cancelled): the next may go.
    pub(crate) fn abandon_probe(&self) {
        self.lock().probing = false;
    }

    pub(crate) fn is_open(&self) -> bool {
        self.lock().open_until.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn opens_after_failures_in_a_row_then_probes_one_at_a_time_with_backoff() {
        let c = Circuit::new(3, Duration::from_secs(4));
        let t0 = Instant::now();
        // An answer in between resets the count.
        for _ in 0..2 {
            assert_eq!(c.record(Pass::Normal, Seen::Unreachable, t0), Change::None);
        }
        assert_eq!(c.record(Pass::Normal, Seen::Answer, t0), Change::None);
        for _ in 0..2 {
            c.record(Pass::Normal, Seen::Unreachable, t0);
        }
        assert_eq!(
            c.record(Pass::Normal, Seen::Unreachable, t0),
            Change::Opened
        );
        assert!(c.is_open());
        // Open: every attempt waits the rest of the second.
        assert_eq!(c.enter(t0), Err(S));
        assert_eq!(c.enter(t0 + S / 2), Err(S / 2));
        // Then one probe; the others wait while it is in flight.
        assert_eq!(c.enter(t0 + S), Ok(Pass::Probe));
        assert_eq!(c.enter(t0 + S), Err(PROBE_WAIT));
        // A failed probe: open twice as long (2 s), then 4 s, never more than the bound.
        let t1 = t0 + S;
        assert_eq!(c.record(Pass::Probe, Seen::Unreachable, t1), Change::None);
        assert_eq!(c.enter(t1 + S), Err(S));
        assert_eq!(c.enter(t1 + 2 * S), Ok(Pass::Probe));
        let t2 = t1 + 2 * S;
        c.record(Pass::Probe, Seen::Unreachable, t2);
        assert_eq!(c.enter(t2 + 3 * S), Err(S));
        assert_eq!(c.enter(t2 + 4 * S), Ok(Pass::Probe));
        let t3 = t2 + 4 * S;
        c.record(Pass::Probe, Seen::Unreachable, t3);
        assert_eq!(c.enter(t3), Err(4 * S), "the bound");
        // An answer to the probe closes it: everyone goes, the backoff starts over.
        assert_eq!(c.enter(t3 + 4 * S), Ok(Pass::Probe));
        assert_eq!(
            c.record(Pass::Probe, Seen::Answer, t3 + 4 * S),
            Change::Closed
        );
        assert_eq!(c.enter(t3 + 4 * S), Ok(Pass::Normal));
        assert!(!c.is_open());
    }
}

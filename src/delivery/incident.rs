//! What the log says of one hook's troubles, a line per incident per interval (design rule 13):
//! failed attempts (the first of an incident at once, then at most one line a minute with how
//! many more failed), a line when the hook's callbacks succeed again after a logged failure,
//! and for a full queue one line a minute with how many callbacks were dropped and the oldest
//! event lost. The per-attempt detail is in the metrics.

use std::time::{Duration, Instant};

/// At most one line of a kind per hook this often.
pub(crate) const EVERY: Duration = Duration::from_secs(60);

/// One hook's failures.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// When the last "failed" line was written.
    logged: Option<Instant>,
    /// Failed attempts since the last line.
    unlogged: u64,
    /// Failed attempts since the last success, and when the first of them was.
    streak: u64,
    since: Option<Instant>,
    /// A "failed" line was written since the last success (so its end is said too).
    said: bool,
}

/// What to log after an attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    None,
    /// A failed attempt, with how many failed unlogged before it.
    Failed {
        before: u64,
    },
    /// Success after a logged failure: how many attempts failed, for how long.
    Recovered {
        failed: u64,
        lasted: Duration,
    },
}

impl Failures {
    /// After a failed attempt at `now`.
    pub(crate) fn failed(&mut self, now: Instant) -> Line {
        self.streak += 1;
        self.since.get_or_insert(now);
        if self.logged.is_some_and(|t| now.duration_since(t) < EVERY) {
            self.unlogged += 1;
            return Line::None;
        }
        self.logged = Some(now);
        self.said = true;
        Line::Failed {
            before: std::mem::take(&mut self.unlogged),
        }
    }

    /// After a successful attempt at `now`.
    pub(crate) fn succeeded(&mut self, now: Instant) -> Line {
        let line = match (self.said, self.since) {
            (true, Some(since)) => Line::Recovered {
                failed: self.streak,
                lasted: now.duration_since(since),
            },
            _ => Line::None,
        };
        self.streak = 0;
        self.since = None;
        self.said = false;
        line
    }
}

/// One hook's dropped callbacks (its queue full).
#[derive(Debug, Default)]
pub(crate) struct Drops {
    logged: Option<Instant>,
    /// Dropped since the last line, and the oldest of them (event id, timestamp).
    unlogged: u64,
    oldest: Option<(String, u64)>,
}

impl Drops {
    /// `n` callbacks dropped at `now`, the oldest `oldest`: `Some((count, oldest))` to log now.
    pub(crate) fn dropped(
        &mut self,
        now: Instant,
        n: u64,
        oldest: (String, u64),
    ) -> Option<(u64, (String, u64))> {
        self.unlogged += n;
        self.oldest.get_or_insert(oldest);
        if self.logged.is_some_and(|t| now.duration_since(t) < EVERY) {
            return None;
        }
        self.logged = Some(now);
        let oldest = self.oldest.take()?;
        Some((std::mem::take(&mut self.unlogged), oldest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_receiver_gets_one_line_a_minute_and_one_when_it_is_back() {
        let t = Instant::now();
        let s = |n: u64| t + Duration::from_secs(n);
        let mut f = Failures::default();
        assert_eq!(f.failed(s(0)), Line::Failed { before: 0 });
        for i in 1..60 {
            assert_eq!(f.failed(s(i)), Line::None);
        }
        assert_eq!(f.failed(s(60)), Line::Failed { before: 59 });
        assert_eq!(
            f.succeeded(s(61)),
            Line::Recovered {
                failed: 61,
                lasted: Duration::from_secs(61)
            }
        );
        assert_eq!(f.succeeded(s(62)), Line::None);
    }

    #[test]
    fn a_flapping_receiver_is_bounded_too() {
        let t = Instant::now();
        let mut f = Failures::default();
        let mut lines = 0;
        for i in 0..600u64 {
            let now = t + Duration::from_millis(i * 100);
            let line = if i % 2 == 0 {
                f.failed(now)
            } else {
                f.succeeded(now)
            };
            lines += usize::from(line != Line::None);
        }
        // 60 s: one failure line and its recovery.
        assert_eq!(lines, 2);
    }

    #[test]
    fn drops_are_summed_between_lines_with_the_oldest_lost() {
        let t = Instant::now();
        let mut d = Drops::default();
        assert_eq!(
            d.dropped(t, 1, ("e1".into(), 1)),
            Some((1, ("e1".into(), 1)))
        );
        assert_eq!(
            d.dropped(t + Duration::from_secs(1), 1, ("e2".into(), 2)),
            None
        );
        assert_eq!(
            d.dropped(t + Duration::from_secs(2), 3, ("e3".into(), 3)),
            None
        );
        assert_eq!(
            d.dropped(t + Duration::from_secs(61), 1, ("e7".into(), 7)),
            Some((5, ("e2".into(), 2)))
        );
    }
}

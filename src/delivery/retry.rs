//! Retry policy: how long to wait after the k-th failed attempt, and when to give up.

use std::time::Duration;

/// The schedule of one hook.
#[derive(Debug, Clone)]
pub(crate) struct RetryPolicy {
    intervals: Vec<Duration>,
    /// Permanent hooks never give up: they go on at the last interval.
    permanent: bool,
    /// The longest `Retry-After` honoured without counting the answer as a failure
    /// (`delivery.max_retry_after_s`); `None`: every such answer counts, on the schedule.
    max_retry_after: Option<Duration>,
}

impl RetryPolicy {
    pub(crate) fn new(intervals_ms: &[u64], permanent: bool) -> Self {
        Self {
            intervals: intervals_ms
                .iter()
                .map(|ms| Duration::from_millis(*ms))
                .collect(),
            permanent,
            max_retry_after: None,
        }
    }

    /// This policy, honouring a receiver's `Retry-After` up to `max` (zero: not at all).
    pub(crate) fn with_max_retry_after(self, max: Duration) -> Self {
        Self {
            max_retry_after: (!max.is_zero()).then_some(max),
            ..self
        }
    }

    /// What a receiver's `Retry-After` of `asked` means: `Ok(wait)` when it is honoured as
    /// asked (within the bound: not a failure toward the hook's removal), `Err(wait)` when
    /// it asks for more (a failure like any other, waiting the bound, if the schedule goes
    /// on). Without a bound, `None`.
    pub(crate) fn asked(&self, asked: Duration) -> Option<Result<Duration, Duration>> {
        let max = self.max_retry_after?;
        Some(if asked <= max { Ok(asked) } else { Err(max) })
    }

    /// The wait before the next attempt after `failures` failed attempts (1-based), or `None`
    /// when the hook should be given up.
    pub(crate) fn next_delay(&self, failures: usize) -> Option<Duration> {
        match self.intervals.get(failures.saturating_sub(1)) {
            Some(d) => Some(*d),
            None if self.permanent => self.intervals.last().copied(),
            None => None,
        }
    }

    /// After `failures` failed attempts of one callback, how long until the hook is given up
    /// if every attempt to come fails too (their request time not counted); `None` for a hook
    /// that is never given up.
    pub(crate) fn left_after(&self, failures: usize) -> Option<Duration> {
        if self.permanent {
            return None;
        }
        Some(self.intervals.iter().skip(failures.saturating_sub(1)).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_then_give_up() {
        let p = RetryPolicy::new(&[100, 200, 300], false);
        let waits: Vec<_> = (1..=4).map(|k| p.next_delay(k)).collect();
        assert_eq!(
            waits,
            vec![
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(300)),
                None
            ]
        );
    }

    #[test]
    fn the_time_left_is_the_waits_still_to_come() {
        let p = RetryPolicy::new(&[100, 200, 300], false);
        assert_eq!(p.left_after(1), Some(Duration::from_millis(600)));
        assert_eq!(p.left_after(3), Some(Duration::from_millis(300)));
        assert_eq!(p.left_after(4), Some(Duration::ZERO));
        assert_eq!(RetryPolicy::new(&[100], true).left_after(1), None);
    }

    #[test]
    fn a_retry_after_within_the_bound_is_honoured_and_beyond_it_is_cut() {
        let p = RetryPolicy::new(&[100], false).with_max_retry_after(Duration::from_secs(600));
        assert_eq!(
            p.asked(Duration::from_secs(5)),
            Some(Ok(Duration::from_secs(5)))
        );
        assert_eq!(
            p.asked(Duration::from_secs(600)),
            Some(Ok(Duration::from_secs(600)))
        );
        assert_eq!(
            p.asked(Duration::from_secs(3600)),
            Some(Err(Duration::from_secs(600)))
        );
        let off = RetryPolicy::new(&[100], false).with_max_retry_after(Duration::ZERO);
        assert_eq!(off.asked(Duration::from_secs(5)), None);
    }

    #[test]
    fn permanent_goes_on_at_last_interval() {
        let p = RetryPolicy::new(&[100, 200], true);
        assert_eq!(p.next_delay(3), Some(Duration::from_millis(200)));
        assert_eq!(p.next_delay(1000), Some(Duration::from_millis(200)));
    }
}

//! What one attempt decides, as a pure function: [`judge`] takes the attempt's outcome (or
//! that the callback could not be signed, its tenant being gone) and the callback's failing
//! spell so far, and returns the whole [`Decision`] the worker carries out (delivered; again
//! after a wait; the schedule ran out; refused), with the hook notice it calls for and the
//! spell after it. A new rule (say, a status that gives a hook up at once) is a change here.

use std::time::Duration;

use super::{client::DeliveryError, retry::RetryPolicy, sign::UnknownTenant};

/// One callback's failures so far, and whether `hook-failing` was told in this spell (then its
/// end is told: `hook-recovered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Spell {
    failures: usize,
    told_failing: bool,
}

impl Spell {
    /// The failed attempts that counted ([`counts`]).
    pub(crate) fn failures(&self) -> usize {
        self.failures
    }

    /// The schedule from its start (a disabled hook enabled again), still in the same spell.
    pub(crate) fn restarted(self) -> Self {
        Self {
            failures: 0,
            ..self
        }
    }
}

/// A hook notice an attempt calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tell {
    /// Its failures reached `delivery.failing_after`.
    Failing,
    /// Delivered after `hook-failing` was told.
    Recovered,
}

impl Tell {
    /// The notice's event id.
    pub(crate) fn event_id(self) -> &'static str {
        match self {
            Self::Failing => "hook-failing",
            Self::Recovered => "hook-recovered",
        }
    }
}

/// An attempt: what the receiver answered (or why it did not), or that the callback could not
/// be signed (its tenant is gone).
pub(crate) type Attempt = Result<Result<u16, DeliveryError>, UnknownTenant>;

/// What the worker does after an attempt, with what it needs to do it.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Delivered (the receiver's `status`): on to the next callback.
    Delivered { status: u16, tell: Option<Tell> },
    /// The same callback again after `wait`. `tried`: false when the receiver's open circuit
    /// held it back (then it was not an attempt).
    Retry {
        wait: Duration,
        tried: bool,
        error: DeliveryError,
        tell: Option<Tell>,
    },
    /// The schedule ran out: the hook is given up (`delivery.on_give_up`).
    Exhausted {
        error: DeliveryError,
        tell: Option<Tell>,
    },
    /// Not signed, so not sent: the hook's tenant is gone. Nothing tried, nothing counted; the
    /// hook waits for its tenant.
    Refused(UnknownTenant),
}

impl Decision {
    /// What the receiver answered, when the callback went to it (an attempt to record).
    pub(crate) fn attempted(&self) -> Option<Result<u16, &DeliveryError>> {
        match self {
            Self::Delivered { status, .. } => Some(Ok(*status)),
            Self::Retry {
                tried: true, error, ..
            }
            | Self::Exhausted { error, .. } => Some(Err(error)),
            Self::Retry { .. } | Self::Refused(_) => None,
        }
    }

    /// What a hook notice says of the attempt: the status it got, if any, and what went wrong.
    pub(crate) fn about(&self) -> (Option<u16>, Option<String>) {
        match self.attempted() {
            Some(Ok(status)) => (Some(status), None),
            Some(Err(error)) => about(error),
            None => (None, None),
        }
    }

    /// The notice to tell, if any.
    pub(crate) fn tell(&self) -> Option<Tell> {
        match self {
            Self::Delivered { tell, .. }
            | Self::Retry { tell, .. }
            | Self::Exhausted { tell, .. } => *tell,
            Self::Refused(_) => None,
        }
    }
}

/// What a hook notice says of a failed attempt: its status, if any, and its error.
pub(crate) fn about(error: &DeliveryError) -> (Option<u16>, Option<String>) {
    (error.status(), Some(error.to_string()))
}

/// Whether an attempt's outcome counts as a failure toward the hook's removal: every failure
/// but a busy receiver's `Retry-After` within the bound (it asked for time, and is given it).
pub(crate) fn counts(outcome: &Result<u16, DeliveryError>, policy: &RetryPolicy) -> bool {
    match outcome {
        Ok(_) | Err(DeliveryError::CircuitOpen { .. }) => false,
        Err(e) => !matches!(
            e.retry_after().and_then(|asked| policy.asked(asked)),
            Some(Ok(_))
        ),
    }
}

/// Decides after one `attempt`; `failing_after` is `delivery.failing_after`.
pub(crate) fn judge(
    attempt: Attempt,
    spell: Spell,
    policy: &RetryPolicy,
    failing_after: usize,
) -> (Decision, Spell) {
    let outcome = match attempt {
        Err(unknown) => return (Decision::Refused(unknown), spell),
        Ok(outcome) => outcome,
    };
    let counted = counts(&outcome, policy);
    let error = match outcome {
        Ok(status) => {
            let tell = spell.told_failing.then_some(Tell::Recovered);
            return (Decision::Delivered { status, tell }, spell);
        }
        Err(error) => error,
    };
    let mut next = spell;
    next.failures += usize::from(counted);
    let tell =
        (counted && next.failures == failing_after && !spell.told_failing).then_some(Tell::Failing);
    next.told_failing |= tell.is_some();
    let tried = !matches!(error, DeliveryError::CircuitOpen { .. });
    let decision = match wait(&error, next.failures, policy) {
        Some(wait) => Decision::Retry {
            wait,
            tried,
            error,
            tell,
        },
        None => Decision::Exhausted { error, tell },
    };
    (decision, next)
}

/// The wait before the next attempt after `error`, the `failures`-th that counted; `None`
/// when the schedule ran out.
fn wait(error: &DeliveryError, failures: usize, policy: &RetryPolicy) -> Option<Duration> {
    // Not tried: the receiver's circuit says when to look again.
    if let DeliveryError::CircuitOpen { retry_in } = error {
        return Some(*retry_in);
    }
    let asked = error.retry_after().and_then(|asked| policy.asked(asked));
    if let Some(Ok(wait)) = asked {
        return Some(wait);
    }
    policy
        .next_delay(failures)
        .filter(|_| error.should_retry())
        // Asked for more than the bound: the bound, as long as the schedule goes on.
        .map(|wait| asked.map_or(wait, |a| a.unwrap_or_else(|max| max)))
}

#[cfg(test)]
mod tests;

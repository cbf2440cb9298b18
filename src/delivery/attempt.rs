//! One callback's attempts, as steps: [`HookSender::prepare`] signs it with the secrets in
//! force (anew at each attempt, so that a rotation applies to the next one); [`HookSender::send`]
//! posts it; [`judge`], a pure function, says what the outcome
//! means under the hook's retry schedule; [`record`] writes the attempt down (the hook's
//! attempts for people, the metrics). The worker ([`super::worker`]) loops over these steps;
//! giving a hook up is [`super::abandon`].

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{
    client::{CallbackHeaders, DeliveryError, Receiver},
    context::{Books, Sending},
    insight::AttemptRecord,
    journal::Entry,
    retry::RetryPolicy,
    sign::{HookKeys, SignedCallback, UnknownTenant, signed_parsed},
};
use crate::{
    base::time::now_ms,
    hooks::Hook,
    metrics::{TenantLabel, TenantReasonLabels},
};

/// What the hook's schedule makes of one attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Delivered,
    /// Try the same callback again after this wait.
    RetryAfter(Duration),
    /// The schedule ran out: the hook is to be removed.
    GiveUp,
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

/// What an attempt's outcome means: `failures` is how many attempts of this callback have
/// failed and counted ([`counts`]), this one included if it does.
pub(crate) fn judge(
    outcome: &Result<u16, DeliveryError>,
    failures: usize,
    policy: &RetryPolicy,
) -> Verdict {
    let Err(error) = outcome else {
        return Verdict::Delivered;
    };
    // Not tried: the receiver's circuit says when to look again.
    if let DeliveryError::CircuitOpen { retry_in } = error {
        return Verdict::RetryAfter(*retry_in);
    }
    let asked = error.retry_after().and_then(|asked| policy.asked(asked));
    if let Some(Ok(wait)) = asked {
        return Verdict::RetryAfter(wait);
    }
    match policy.next_delay(failures).filter(|_| error.should_retry()) {
        // Asked for more than the bound: the bound, as long as the schedule goes on.
        Some(wait) => Verdict::RetryAfter(asked.map_or(wait, |a| a.unwrap_or_else(|max| max))),
        None => Verdict::GiveUp,
    }
}

/// One attempt of a callback, signed with the secrets in force when it is made (the body and
/// timestamp are the same at every attempt).
pub(crate) struct Prepared<'a> {
    url: String,
    /// `url`, made from the hook's parsed URL (no parse per callback).
    target: Option<reqwest::Url>,
    body: Bytes,
    content_type: &'static str,
    timestamp_header: Option<u64>,
    /// The callback's first timestamp (a redelivery keeps the original's).
    ts: u64,
    domain: std::sync::Arc<str>,
    /// The secrets that sign it.
    keys: HookKeys<'a>,
    redelivery: bool,
}

/// What one hook's attempts need, made once per worker.
pub(crate) struct HookSender<'a> {
    pub hook: &'a Hook,
    /// Why the callback URL is refused, when its IP address is.
    pub blocked: Option<String>,
    /// The receiver whose turns its callbacks take.
    pub receiver: Receiver,
    /// The callback URL, parsed.
    pub parsed: Option<reqwest::Url>,
    pub sending: &'a Sending,
    /// The hooks as they are now (a hook's own secrets change while its worker runs).
    pub registry: &'a crate::hooks::Registry,
}

impl<'a> HookSender<'a> {
    /// The sender of `hook`'s callbacks: an IP address in its URL is checked once here; host
    /// names at each connection.
    pub(crate) fn new(
        hook: &'a Hook,
        sending: &'a Sending,
        registry: &'a crate::hooks::Registry,
    ) -> Self {
        let blocked = sending
            .guard()
            .check_url(&hook.callback_url)
            .err()
            .map(|r| r.to_string());
        Self {
            hook,
            blocked,
            receiver: sending.lanes().client(hook.id).receiver(&hook.callback_url),
            parsed: reqwest::Url::parse(&hook.callback_url).ok(),
            sending,
            registry,
        }
    }

    /// Signs `entry` for one attempt of this hook, with the secrets in force now (its
    /// tenant's or the operator's, and its own): called before every attempt, so that a
    /// rotation applies to the next one.
    ///
    /// # Errors
    /// When the hook's tenant is no longer known: it cannot be signed, nor sent.
    pub(crate) fn prepare(&self, entry: &Entry) -> Result<Prepared<'a>, UnknownTenant> {
        let signer = self.sending.signer();
        let ts = entry.original_ts();
        // The hook as it is now: its own secrets may have been rotated since the worker began.
        let live = self.registry.load().get(self.hook.id).cloned();
        let hook = live.as_deref().unwrap_or(self.hook);
        let keys = signer.keys_for(hook, now_ms())?;
        let secret = keys.secret();
        let SignedCallback {
            url,
            body,
            content_type,
            timestamp_header,
        } = signer.sign_with(
            secret,
            &self.hook.callback_url,
            &entry.payload,
            ts,
            entry.source,
        );
        let target = self
            .parsed
            .as_ref()
            .and_then(|p| signed_parsed(&self.hook.callback_url, p, &url));
        Ok(Prepared {
            url,
            target,
            body: Bytes::from(body),
            content_type,
            timestamp_header,
            ts,
            domain: signer.sources.domain(entry.source),
            keys,
            redelivery: entry.original.is_some(),
        })
    }

    /// One attempt. An attempt under way is finished even when the relay is stopping (the
    /// request timeout bounds it), so that a delivered callback is not sent again after a
    /// restart.
    pub(crate) async fn send(&self, prepared: &Prepared<'_>) -> Result<u16, DeliveryError> {
        if let Some(why) = &self.blocked {
            return Err(DeliveryError::Blocked(why.clone()));
        }
        // Standard Webhooks headers carry the time of the attempt.
        let standard = prepared
            .keys
            .standard_headers(self.hook.id, prepared.ts, &prepared.body);
        let headers = CallbackHeaders {
            bearer: prepared.keys.bearer(),
            standard: standard.as_ref(),
            domain: &prepared.domain,
            redelivery: prepared.redelivery,
            timestamp: prepared.timestamp_header,
        };
        let (body, content_type) = (prepared.body.clone(), prepared.content_type);
        match &prepared.target {
            Some(u) => {
                self.receiver
                    .post(u.clone(), body, content_type, headers)
                    .await
            }
            None => {
                let url = prepared.url.as_str();
                self.receiver.post(url, body, content_type, headers).await
            }
        }
    }
}

/// Writes one attempt of `entry` down: in the hook's attempts (with, for a failure, when the
/// hook is given up if every attempt to come fails too) and in the metrics. `failures`
/// counts this one when it failed; `started` is when it began.
pub(crate) fn record(
    books: &Books,
    hook: &Hook,
    entry: &Entry,
    outcome: &Result<u16, DeliveryError>,
    (failures, policy): (usize, &RetryPolicy),
    started: Instant,
) {
    let attempt = match outcome {
        Ok(_) => failures + 1,
        Err(_) => failures,
    };
    let mut record = AttemptRecord {
        at: now_ms(),
        event: entry.event_id.to_string(),
        ts: entry.original_ts(),
        attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
        status: None,
        error: None,
        latency_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    let metrics = books.metrics();
    let tenant = hook.tenant.as_deref();
    match outcome {
        Ok(status) => {
            record.status = Some(*status);
            books.insight().attempt(hook.id, record, None);
            metrics
                .callbacks_delivered
                .get_or_create(&TenantLabel::of(tenant))
                .inc();
            if let Some(arrived) = entry.arrived {
                metrics
                    .callback_latency
                    .0
                    .observe(arrived.elapsed().as_secs_f64());
            }
        }
        Err(e) => {
            if let DeliveryError::Status(code) = e {
                record.status = Some(*code);
            }
            record.error = Some(e.to_string());
            let due = policy
                .left_after(failures)
                .map(|left| record.at + u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
            books.insight().attempt(hook.id, record, due);
            let reason = TenantReasonLabels::of(tenant, &e.reason());
            metrics.callback_failures.get_or_create(&reason).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(permanent: bool) -> RetryPolicy {
        RetryPolicy::new(&[100, 1_000, 5_000], permanent)
    }

    #[test]
    fn a_2xx_is_delivered_whatever_came_before() {
        for failures in [0, 1, 3, 10] {
            assert_eq!(
                judge(&Ok(204), failures, &policy(false)),
                Verdict::Delivered
            );
        }
    }

    #[test]
    fn failures_follow_the_schedule_then_give_up() {
        let p = policy(false);
        let failed = Err(DeliveryError::Status(500));
        let waits: Vec<Verdict> = (1..=4).map(|n| judge(&failed, n, &p)).collect();
        assert_eq!(
            waits,
            [
                Verdict::RetryAfter(Duration::from_millis(100)),
                Verdict::RetryAfter(Duration::from_millis(1_000)),
                Verdict::RetryAfter(Duration::from_millis(5_000)),
                Verdict::GiveUp,
            ]
        );
    }

    #[test]
    fn every_kind_of_failure_is_judged_alike() {
        let p = policy(false);
        for e in [
            DeliveryError::Timeout,
            DeliveryError::Connect("refused".into()),
            DeliveryError::Request("reset".into()),
            DeliveryError::Blocked("blocked: 10.0.0.1".into()),
            DeliveryError::Status(404),
        ] {
            let outcome = Err(e);
            assert_eq!(
                judge(&outcome, 2, &p),
                Verdict::RetryAfter(Duration::from_secs(1))
            );
            assert_eq!(judge(&outcome, 4, &p), Verdict::GiveUp);
        }
    }

    #[test]
    fn a_busy_receiver_gets_the_time_it_asks_for_and_is_not_given_up_for_asking() {
        let p = policy(false).with_max_retry_after(Duration::from_secs(600));
        let busy = |s| {
            Err(DeliveryError::AskedToWait {
                status: 429,
                retry_after: Duration::from_secs(s),
            })
        };
        // Within the bound: the wait asked, not counted, never a reason to give up.
        assert!(!counts(&busy(30), &p));
        for failures in [0, 3, 10] {
            assert_eq!(
                judge(&busy(30), failures, &p),
                Verdict::RetryAfter(Duration::from_secs(30))
            );
        }
        // Beyond it: counted, the bound as the wait while the schedule goes on.
        assert!(counts(&busy(3600), &p));
        assert_eq!(
            judge(&busy(3600), 1, &p),
            Verdict::RetryAfter(Duration::from_secs(600))
        );
        assert_eq!(judge(&busy(3600), 4, &p), Verdict::GiveUp);
        // Without a bound (0), an ordinary failure on the schedule.
        let off = policy(false).with_max_retry_after(Duration::ZERO);
        assert!(counts(&busy(30), &off));
        assert_eq!(
            judge(&busy(30), 1, &off),
            Verdict::RetryAfter(Duration::from_millis(100))
        );
        assert!(counts(&Err(DeliveryError::Status(503)), &p));
        assert!(!counts(&Ok(200), &p));
    }

    #[test]
    fn a_permanent_hook_is_never_given_up() {
        let p = policy(true);
        let failed = Err(DeliveryError::Timeout);
        for failures in [4, 5, 100, 100_000] {
            assert_eq!(
                judge(&failed, failures, &p),
                Verdict::RetryAfter(Duration::from_millis(5_000))
            );
        }
    }
}

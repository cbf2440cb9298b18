//! One callback's attempts, as steps: [`HookSender::prepare`] signs it with the secrets in
//! force (anew at each attempt, so that a rotation applies to the next one); [`HookSender::send`]
//! posts it; [`super::judge`], a pure function, decides what the outcome means; [`record`]
//! writes the attempt down (the hook's
//! attempts for people, the metrics). The worker ([`super::worker`]) loops over these steps;
//! giving a hook up is [`super::abandon`].

use std::time::Instant;

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
    traces::TraceParent,
};

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
    pub(super) hook: &'a Hook,
    /// Why the callback URL is refused, when its IP address is.
    blocked: Option<String>,
    /// The receiver whose turns its callbacks take.
    receiver: Receiver,
    /// The callback URL, parsed.
    parsed: Option<reqwest::Url>,
    sending: &'a Sending,
    /// The hooks as they are now (a hook's own secrets change while its worker runs).
    registry: &'a crate::hooks::Registry,
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
        let (signed, keys) =
            signer.sign_attempt(hook, &entry.payload, (ts, entry.source), now_ms())?;
        let SignedCallback {
            url,
            body,
            content_type,
            timestamp_header,
        } = signed;
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
            domain: signer.sources().domain(entry.source),
            keys,
            redelivery: entry.original.is_some(),
        })
    }

    /// One attempt. An attempt under way is finished even when the relay is stopping (the
    /// request timeout bounds it), so that a delivered callback is not sent again after a
    /// restart.
    pub(crate) async fn send(
        &self,
        prepared: &Prepared<'_>,
        traceparent: Option<&str>,
    ) -> Result<u16, DeliveryError> {
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
            traceparent,
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
    outcome: Result<u16, &DeliveryError>,
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
        trace_id: entry.trace.as_deref().map(TraceParent::trace_id_hex),
    };
    let metrics = books.metrics();
    let tenant = hook.tenant.as_deref();
    match outcome {
        Ok(status) => {
            record.status = Some(status);
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

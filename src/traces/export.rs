//! Spans on their way out: a span processor that queues each ended span without ever
//! waiting (a full queue drops it, counted), and one task that sends the queue in batches
//! through opentelemetry-otlp's exporter (HTTP with the relay's own reqwest client, or
//! gRPC), each export bounded by `timeout` (a batch the collector refuses or holds is
//! dropped, counted). Delivery never waits for a collector.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SpanData, SpanExporter, SpanProcessor},
};
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::metrics::Metrics;

/// Most spans in one export.
const BATCH: usize = 512;
/// How long a batch that is not full waits for more spans.
const LINGER: Duration = Duration::from_millis(200);
/// After the stop, how long the spans of the last attempts may take to arrive.
const AT_STOP: Duration = Duration::from_millis(500);
/// After the stop, the longest one export may take (a hanging collector must not hold the
/// stop up).
const LAST_EXPORT: Duration = Duration::from_secs(2);
/// At most one warning about a failing collector per this interval.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Queues ended spans for [`run`], never blocking.
#[derive(Debug)]
pub(super) struct Queue {
    tx: mpsc::Sender<SpanData>,
    metrics: Arc<MetricsRef>,
}

/// The metrics, in a `Debug` wrapper (the SDK's processors must be `Debug`).
pub(super) struct MetricsRef(pub(super) Arc<Metrics>);

impl std::fmt::Debug for MetricsRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Queue {
    /// A queue of at most `max` spans, and its receiving end for [`run`].
    pub(super) fn new(max: usize, metrics: Arc<Metrics>) -> (Self, mpsc::Receiver<SpanData>) {
        let (tx, rx) = mpsc::channel(max.max(1));
        (
            Self {
                tx,
                metrics: Arc::new(MetricsRef(metrics)),
            },
            rx,
        )
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        // Closed: the relay has stopped and its last export is done.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(span) {
            self.metrics.0.traces.queue_full(1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// Sends the queued spans in batches until the relay stops (then what arrives within
/// [`AT_STOP`]).
pub(super) fn spawn(
    exporter: opentelemetry_otlp::SpanExporter,
    rx: mpsc::Receiver<SpanData>,
    metrics: Arc<Metrics>,
    timeout: Duration,
    (tracker, token): (&TaskTracker, &CancellationToken),
) {
    tracker.spawn(run(exporter, rx, metrics, timeout, token.clone()));
}

async fn run(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    metrics: Arc<Metrics>,
    timeout: Duration,
    token: CancellationToken,
) {
    let mut health = Health::default();
    let mut batch = Vec::with_capacity(BATCH);
    let mut stop_at: Option<tokio::time::Instant> = None;
    loop {
        let deadline = stop_at.unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    break;
                }
            }
            () = token.cancelled(), if stop_at.is_none() => {
                stop_at = Some(tokio::time::Instant::now() + AT_STOP);
                continue;
            }
            () = tokio::time::sleep_until(deadline), if stop_at.is_some() => break,
        }
        // A batch that is not full waits a little for more, so that a quiet relay sends a
        // request per LINGER rather than one per span.
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH {
            let room = BATCH - batch.len();
            match tokio::time::timeout_at(until, rx.recv_many(&mut batch, room)).await {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        let full = std::mem::take(&mut batch);
        export(&exporter, full, (timeout, &token), &metrics, &mut health).await;
    }
    while let Ok(span) = rx.try_recv() {
        batch.push(span);
    }
    if !batch.is_empty() {
        export(&exporter, batch, (timeout, &token), &metrics, &mut health).await;
    }
}

/// Whether the collector took the last batch, for one log line per change (and a reminder a
/// minute while it fails).
#[derive(Default)]
struct Health {
    failing_since: Option<Instant>,
    warned: Option<Instant>,
}

/// Exports one batch within `timeout`, and within [`LAST_EXPORT`] once `stop` is cancelled
/// (a hanging collector must not hold the stop up).
async fn export(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: Vec<SpanData>,
    (timeout, stop): (Duration, &CancellationToken),
    metrics: &Metrics,
    health: &mut Health,
) {
    let n = batch.len();
    let stopping = async {
        stop.cancelled().await;
        tokio::time::sleep(LAST_EXPORT).await;
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(timeout, exporter.export(batch)) => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        },
        () = stopping => Err("the relay stopped before the collector answered".to_string()),
    };
    match outcome {
        Ok(()) => {
            metrics.traces.exported(n);
            if let Some(since) = health.failing_since.take() {
                tracing::info!(
                    failed_for_s = since.elapsed().as_secs(),
                    "the trace collector takes spans again"
                );
                health.warned = None;
            }
        }
        Err(error) => {
            metrics.traces.export_failed(n);
            let now = Instant::now();
            health.failing_since.get_or_insert(now);
            if health
                .warned
                .is_none_or(|w| now.duration_since(w) >= WARN_EVERY)
            {
                health.warned = Some(now);
                tracing::warn!(
                    %error,
                    spans = n,
                    "cannot export spans to the trace collector; they are dropped and counted (hookrelay_trace_spans_dropped_total), deliveries go on"
                );
            }
        }
    }
}

/// The OTLP exporter's HTTP client: the relay's reqwest (rustls), so that no second client is
/// built in.
#[derive(Debug)]
pub(super) struct Http(pub(super) reqwest::Client);

/// The most of a collector's answer read.
const MAX_ANSWER: usize = 1 << 20;

#[async_trait::async_trait]
impl HttpClient for Http {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let mut answer = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await?;
        let (status, headers) = (answer.status(), answer.headers().clone());
        let mut read = Vec::new();
        while let Some(chunk) = answer.chunk().await? {
            if read.len() + chunk.len() > MAX_ANSWER {
                return Err("the collector's answer is too large".into());
            }
            read.extend_from_slice(&chunk);
        }
        let mut out = http::Response::new(Bytes::from(read));
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

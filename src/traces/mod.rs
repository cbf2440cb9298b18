//! OpenTelemetry traces (`[tracing]`, `docs/tracing.md`): one trace per bus message, from its
//! receipt through processing, routing and each hook's queue to every attempt, exported over
//! OTLP. Bottom first: a span's place in its trace as W3C writes it, which queued callbacks keep
//! ([`parent`]); the file's keys with the `OTEL_*` variables over them ([`settings`]); the queue
//! and the task that export spans without ever holding delivery back ([`export`]); the spans
//! themselves, their names and attributes ([`spans`]). Off (no [`Traces`]), nothing here runs.

mod export;
mod parent;
mod settings;
mod spans;

use std::sync::Arc;

use opentelemetry::{KeyValue, trace::TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::{
    Resource,
    trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use parent::TraceParent;
pub(crate) use settings::{Resolved, Settings, resolve};
pub(crate) use spans::{
    AttemptSpan, MessageTrace, PluginCall, Receipt, end_enqueue, url_attributes,
};

use crate::{config::traces::OtlpProtocol, metrics::Metrics};

/// The relay's tracer, while traces are on.
pub(crate) struct Traces {
    tracer: SdkTracer,
    /// Kept so that the tracer's processor lives as long as the relay.
    _provider: SdkTracerProvider,
}

impl Traces {
    /// Traces as `[tracing]` and the `OTEL_*` variables set them, their export started on
    /// `tracker` until `token` stops it; `None` when they are off, or when the exporter cannot
    /// be built (logged: the relay runs without traces rather than not at all).
    pub(crate) fn start(
        config: &crate::config::traces::TracingConfig,
        metrics: &Arc<Metrics>,
        tracker: &TaskTracker,
        token: &CancellationToken,
    ) -> Option<Arc<Self>> {
        let Resolved { settings, warnings } = resolve(config, &|k| std::env::var(k).ok());
        for w in warnings {
            tracing::warn!("{w}");
        }
        let settings = settings?;
        match Self::build(&settings, metrics, (tracker, token)) {
            Ok(traces) => {
                tracing::info!(
                    endpoint = %redacted(&settings.endpoint),
                    protocol = settings.protocol.name(),
                    sample_ratio = settings.ratio,
                    service = %settings.service_name,
                    "traces are exported over OTLP"
                );
                metrics.traces.touch();
                Some(Arc::new(traces))
            }
            Err(e) => {
                tracing::error!(error = %e, "the trace exporter cannot be built: no traces");
                None
            }
        }
    }

    fn build(
        s: &Settings,
        metrics: &Arc<Metrics>,
        run_on: (&TaskTracker, &CancellationToken),
    ) -> Result<Self, String> {
        let retry = opentelemetry_otlp::RetryPolicy::disabled();
        let mut exporter = match s.protocol {
            OtlpProtocol::HttpProtobuf => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let client = reqwest::Client::builder()
                    .timeout(s.timeout)
                    .connect_timeout(s.timeout)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("hookrelay/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| e.to_string())?;
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    // Resolved already (the variables over the file): not read again.
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_http_client(export::Http(client))
                    .with_endpoint(&s.endpoint)
                    .with_headers(s.headers.iter().cloned().collect())
                    .with_timeout(s.timeout)
                    .with_retry_policy(retry)
                    .build()
            }
            OtlpProtocol::Grpc => {
                let mut headers = http::HeaderMap::new();
                for (k, v) in &s.headers {
                    let name = http::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|_| format!("header {k:?}"))?;
                    let value =
                        http::HeaderValue::from_str(v).map_err(|_| format!("header {k:?}"))?;
                    headers.insert(name, value);
                }
                let metadata =
                    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers);
                let _ = rustls::crypto::ring::default_provider().install_default();
                opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_protocol(opentelemetry_otlp::Protocol::Grpc)
                    .with_endpoint(&s.endpoint)
                    .with_metadata(metadata)
                    .with_timeout(s.timeout)
                    .with_retry_policy(retry)
                    .build()
            }
        }
        .map_err(|e| e.to_string())?;
        let resource = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("service.name", s.service_name.clone()),
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            ])
            .build();
        exporter.set_resource(&resource);
        let (queue, rx) = export::Queue::new(s.max_queue, metrics.clone());
        export::spawn(exporter, rx, metrics.clone(), s.timeout, run_on);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                s.ratio,
            ))))
            .with_resource(resource)
            .build();
        Ok(Self {
            tracer: provider.tracer("hookrelay"),
            _provider: provider,
        })
    }
}

/// `endpoint` without credentials, query or fragment (a vendor's key may be in any), for the
/// log.
fn redacted(endpoint: &str) -> String {
    match url::Url::parse(endpoint) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(not a URL)".into(),
    }
}

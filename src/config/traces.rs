//! `[tracing]`: OpenTelemetry traces of each bus message, exported over OTLP
//! (`docs/tracing.md`). The standard `OTEL_*` variables override these keys when the relay
//! starts (the traces module resolves them); this is the file's side only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::secret::Secret;

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP: `POST <endpoint>/v1/traces` (port 4318 by convention).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// gRPC (port 4317 by convention).
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    /// Its name in the configuration and in `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn name(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }

    /// The protocol named `name` (`http/protobuf` or `grpc`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            "http/protobuf" => Some(Self::HttpProtobuf),
            "grpc" => Some(Self::Grpc),
            _ => None,
        }
    }
}

/// Traces: off while no endpoint is set here or in `OTEL_EXPORTER_OTLP_ENDPOINT` /
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// The collector's address, as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it: over HTTP spans go to
    /// `<endpoint>/v1/traces`; over gRPC to the endpoint itself. Empty: no traces.
    pub otlp_endpoint: String,
    /// `http/protobuf` or `grpc`.
    pub protocol: OtlpProtocol,
    /// The share of bus messages traced, from 0 to 1 (by trace id, so a message's spans are
    /// all kept or all left out).
    pub sample_ratio: f64,
    /// Headers sent with every export (a collector's API key): never logged.
    pub headers: BTreeMap<String, Secret>,
    /// The `service.name` of the spans.
    pub service_name: String,
    /// How long one export may take; a collector slower than this loses that batch (counted).
    pub timeout_ms: u64,
    /// Most spans waiting for export; more are dropped (counted), never waited for.
    pub max_queue: usize,
}

impl Default for TracingConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: String::new(),
            protocol: OtlpProtocol::HttpProtobuf,
            sample_ratio: 1.0,
            headers: BTreeMap::new(),
            service_name: "hookrelay".into(),
            timeout_ms: 10_000,
            max_queue: 8192,
        }
    }
}

/// Whether `text` is an endpoint an OTLP exporter can send to: an http(s) URL with a host.
pub fn is_endpoint(text: &str) -> bool {
    matches!(url::Url::parse(text.trim()), Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()))
}

impl TracingConfig {
    /// Checks the file's keys (the `OTEL_*` variables are checked, and skipped when unusable,
    /// at the start).
    ///
    /// # Errors
    /// Names the first `tracing.` key whose value is unusable.
    pub fn validate(&self) -> Result<(), String> {
        if !self.otlp_endpoint.is_empty() && !is_endpoint(&self.otlp_endpoint) {
            // Not the value: a collector's key may be in it.
            return Err(
                "tracing.otlp_endpoint: not an http(s) URL (for example http://127.0.0.1:4318)"
                    .into(),
            );
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err("tracing.sample_ratio: must be from 0 to 1".into());
        }
        for (name, value) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value.expose()).is_err()
            {
                return Err(format!(
                    "tracing.headers: {name:?} is not a usable HTTP header"
                ));
            }
        }
        if self.timeout_ms == 0 || self.max_queue == 0 {
            return Err("tracing.timeout_ms and tracing.max_queue: must be more than 0".into());
        }
        if self.service_name.trim().is_empty() {
            return Err("tracing.service_name: must not be empty".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_that_is_not_a_url_is_refused_with_its_key() {
        let bad = TracingConfig {
            otlp_endpoint: "collector:4318".into(),
            ..TracingConfig::default()
        };
        let e = bad.validate().unwrap_err();
        assert!(e.starts_with("tracing.otlp_endpoint:"), "{e}");
        let good = TracingConfig {
            otlp_endpoint: "http://collector:4318".into(),
            ..TracingConfig::default()
        };
        assert_eq!(good.validate(), Ok(()));
        let ratio = TracingConfig {
            sample_ratio: 1.5,
            ..TracingConfig::default()
        };
        assert!(
            ratio
                .validate()
                .unwrap_err()
                .starts_with("tracing.sample_ratio")
        );
    }

    #[test]
    fn protocols_by_their_standard_names() {
        assert_eq!(OtlpProtocol::parse("grpc"), Some(OtlpProtocol::Grpc));
        assert_eq!(
            OtlpProtocol::parse("http/protobuf"),
            Some(OtlpProtocol::HttpProtobuf)
        );
        assert_eq!(OtlpProtocol::parse("http/json"), None);
    }
}

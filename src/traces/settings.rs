//! What the exporter is set up with: `[tracing]`, overridden by the standard OpenTelemetry
//! variables (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER*`,
//! `OTEL_TRACES_EXPORTER`, `OTEL_SDK_DISABLED`), as the OpenTelemetry specification says. An
//! unusable variable is passed over with a warning: it never stops the start (the file's keys
//! were checked by `check-config`). Pure: the environment is a function.

use std::time::Duration;

use crate::config::traces::{OtlpProtocol, TracingConfig, is_endpoint};

/// Where spans go and which are kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// The URL spans are sent to: over HTTP with its `/v1/traces` path.
    pub(crate) endpoint: String,
    pub(crate) protocol: OtlpProtocol,
    /// Header names and values sent with each export.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) service_name: String,
    /// The share of messages traced.
    pub(crate) ratio: f64,
    pub(crate) timeout: Duration,
    pub(crate) max_queue: usize,
}

/// Settings worked out, or none (traces off), and what was passed over.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub(crate) settings: Option<Settings>,
    /// One line per unusable variable, naming it (never a header's value).
    pub(crate) warnings: Vec<String>,
}

/// The path OTLP over HTTP sends traces to, under a base endpoint.
const TRACES_PATH: &str = "v1/traces";

fn joined(base: &str) -> String {
    let base = base.trim();
    if base.ends_with('/') {
        format!("{base}{TRACES_PATH}")
    } else {
        format!("{base}/{TRACES_PATH}")
    }
}

/// `[tracing]` with the environment `env` over it.
pub(crate) fn resolve(file: &TracingConfig, env: &dyn Fn(&str) -> Option<String>) -> Resolved {
    let mut warnings = Vec::new();
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Resolved::default();
    }
    match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        Some("none") => return Resolved::default(),
        None | Some("otlp") => {}
        Some(_) => warnings.push(
            "OTEL_TRACES_EXPORTER is not supported (only otlp and none): otlp is used".into(),
        ),
    }
    let mut protocol = file.protocol;
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(v) = var(name) {
            if let Some(p) = OtlpProtocol::parse(&v) {
                protocol = p;
                break;
            }
            warnings.push(format!(
                "{name} is not supported (http/protobuf or grpc): passed over"
            ));
        }
    }
    let http = protocol == OtlpProtocol::HttpProtobuf;
    // The signal's own variable as it is; the general one as a base, as the file's key.
    let mut endpoint = None;
    for (name, base) in [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", false),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", true),
    ] {
        if let Some(v) = var(name) {
            if is_endpoint(&v) {
                endpoint = Some(if base && http {
                    joined(&v)
                } else {
                    v.trim().to_string()
                });
                break;
            }
            warnings.push(format!("{name} is not an http(s) URL: passed over"));
        }
    }
    let endpoint = endpoint.or_else(|| {
        (!file.otlp_endpoint.is_empty()).then(|| {
            if http {
                joined(&file.otlp_endpoint)
            } else {
                file.otlp_endpoint.trim().to_string()
            }
        })
    });
    let Some(endpoint) = endpoint else {
        return Resolved {
            settings: None,
            warnings,
        };
    };
    let mut headers: Vec<(String, String)> = file
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.expose().to_string()))
        .collect();
    for name in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        if let Some(v) = var(name) {
            for (k, value) in parse_headers(name, &v, &mut warnings) {
                headers.retain(|(have, _)| *have != k);
                headers.push((k, value));
            }
        }
    }
    let service_name = var("OTEL_SERVICE_NAME")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| file.service_name.clone());
    let ratio = sampler_ratio(file.sample_ratio, &var, &mut warnings);
    let mut timeout = Duration::from_millis(file.timeout_ms);
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ] {
        if let Some(v) = var(name) {
            if let Ok(ms @ 1..) = v.trim().parse::<u64>() {
                timeout = Duration::from_millis(ms);
                break;
            }
            warnings.push(format!(
                "{name} is not a number of milliseconds: passed over"
            ));
        }
    }
    Resolved {
        settings: Some(Settings {
            endpoint,
            protocol,
            headers,
            service_name,
            ratio,
            timeout,
            max_queue: file.max_queue,
        }),
        warnings,
    }
}

/// `OTEL_TRACES_SAMPLER` and its argument over the file's ratio. The relay's spans have no
/// parent of their own, so the parent-based samplers sample as their root sampler does.
fn sampler_ratio(
    file: f64,
    var: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> f64 {
    let Some(sampler) = var("OTEL_TRACES_SAMPLER") else {
        return file;
    };
    match sampler.trim() {
        "always_on" | "parentbased_always_on" => 1.0,
        "always_off" | "parentbased_always_off" => 0.0,
        "traceidratio" | "parentbased_traceidratio" => {
            match var("OTEL_TRACES_SAMPLER_ARG").map(|a| a.trim().parse::<f64>()) {
                Some(Ok(r)) if (0.0..=1.0).contains(&r) => r,
                None => 1.0,
                Some(_) => {
                    warnings.push(
                        "OTEL_TRACES_SAMPLER_ARG is not a ratio from 0 to 1: 1 is used".into(),
                    );
                    1.0
                }
            }
        }
        _ => {
            warnings
                .push("OTEL_TRACES_SAMPLER is not supported: tracing.sample_ratio is used".into());
            file
        }
    }
}

/// `key=value,key2=value2`, values percent-decoded, as the OTLP exporter specification writes
/// headers; an unusable pair is passed over (named by its key only).
fn parse_headers(name: &str, text: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            warnings.push(format!("{name}: an entry without '=' is passed over"));
            continue;
        };
        let key = k.trim().to_ascii_lowercase();
        let value = percent_encoding::percent_decode_str(v.trim()).decode_utf8_lossy();
        if http::HeaderName::from_bytes(key.as_bytes()).is_err()
            || http::HeaderValue::from_str(&value).is_err()
        {
            warnings.push(format!("{name}: header {key:?} is not usable: passed over"));
            continue;
        }
        out.push((key, value.into_owned()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::secret::Secret;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn file() -> TracingConfig {
        let mut f = TracingConfig {
            otlp_endpoint: "http://file:4318".into(),
            sample_ratio: 0.5,
            ..TracingConfig::default()
        };
        f.headers
            .insert("X-Api-Key".into(), Secret::new("from-file"));
        f
    }

    #[test]
    fn off_without_an_endpoint() {
        let r = resolve(&TracingConfig::default(), &env(&[]));
        assert!(r.settings.is_none());
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn the_file_alone() {
        let s = resolve(&file(), &env(&[])).settings.expect("on");
        assert_eq!(s.endpoint, "http://file:4318/v1/traces");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(
            s.headers,
            [("x-api-key".to_string(), "from-file".to_string())]
        );
        assert_eq!((s.ratio, s.service_name.as_str()), (0.5, "hookrelay"));
    }

    #[test]
    fn the_variables_win_over_the_file() {
        let r = resolve(
            &file(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=from%20env,other=1"),
                ("OTEL_SERVICE_NAME", "relay-eu"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ]),
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let s = r.settings.expect("on");
        assert_eq!(s.endpoint, "http://env:4318/v1/traces");
        assert_eq!(
            s.headers,
            [
                ("x-api-key".to_string(), "from env".to_string()),
                ("other".to_string(), "1".to_string())
            ]
        );
        assert_eq!((s.ratio, s.service_name.as_str()), (0.25, "relay-eu"));
        assert_eq!(s.timeout, Duration::from_millis(2500));
        // The signal's own variable is taken as it is, before the general one.
        let s = resolve(
            &file(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://traces:9999/custom",
                ),
            ]),
        )
        .settings
        .expect("on");
        assert_eq!(s.endpoint, "http://traces:9999/custom");
        // Variables alone turn traces on; grpc takes the endpoint as it is.
        let s = resolve(
            &TracingConfig::default(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
        )
        .settings
        .expect("on");
        assert_eq!(
            (s.endpoint.as_str(), s.protocol),
            ("http://env:4317", OtlpProtocol::Grpc)
        );
    }

    #[test]
    fn unusable_variables_are_passed_over_never_fatal() {
        let r = resolve(
            &file(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "novalue,bad key=secret-value"),
                ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ]),
        );
        let s = r.settings.expect("on, from the file");
        assert_eq!(s.endpoint, "http://file:4318/v1/traces");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.ratio, 0.5);
        assert_eq!(r.warnings.len(), 6, "{:?}", r.warnings);
        assert!(
            r.warnings.iter().all(|w| !w.contains("secret-value")),
            "a header's value is never told: {:?}",
            r.warnings
        );
    }

    #[test]
    fn an_unusable_signal_variable_leaves_the_general_one_in_force() {
        let r = resolve(
            &file(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "bogus"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "750"),
            ]),
        );
        let s = r.settings.expect("on");
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        assert_eq!(s.timeout, Duration::from_millis(750));
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    }

    #[test]
    fn switched_off_by_the_standard_variables() {
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert!(resolve(&file(), &env(&[off])).settings.is_none(), "{off:?}");
        }
    }
}

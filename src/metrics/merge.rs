//! `/metrics/all`: the server's other exporters (WebRTC unit, service manager, node exporter)
//! fetched in parallel and merged with the relay's own series into one valid Prometheus text
//! exposition. Every sample gets a `source` label (a source's own `source` label becomes
//! `exported_source`); families of one name from several sources share one HELP and TYPE, with
//! their label names unified (a label a part lacks is empty, which Prometheus reads as absent);
//! a family whose TYPE clashes with the one already taken is left out and counted; a source that
//! fails, times out or sends what does not parse is left out and shown by
//! `hookrelay_merge_up{source} 0`. Parsing is openmetrics-parser's; bucket bounds keep the
//! spelling their source gave them (`le="1.0"` stays so, [`super::bounds`]).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use openmetrics_parser::{
    HistogramValue, MetricFamily, MetricNumber, OpenMetricsType, OpenMetricsValue,
    PrometheusCounterValue, PrometheusType, PrometheusValue, Sample,
};

use super::{Metrics, SourceLabel, bounds::Spellings};
use crate::config::MergeSource;

type Family = MetricFamily<PrometheusType, PrometheusValue>;
/// A source's families, and the text they were read from.
type Fetched = (Vec<Family>, String);

/// The name the relay's own series carry in `source`.
pub const OWN_SOURCE: &str = "hookrelay";
/// Most bytes read from one source.
const MAX_BODY: usize = 32 << 20;

impl From<reqwest::Error> for SourceError {
    fn from(e: reqwest::Error) -> Self {
        Self::Request(crate::base::error_text(&e.without_url()))
    }
}

/// Why a source was left out of a scrape.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Its text has no URL (no error text that can reach a log has one).
    #[error("request failed: {0}")]
    Request(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("answer larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error("not UTF-8")]
    NotText,
    #[error("not a valid exposition: {0}")]
    Parse(String),
}

/// Fetches and merges; one per relay.
pub struct Merger {
    client: reqwest::Client,
    sources: Vec<MergeSource>,
    metrics: Arc<Metrics>,
}

impl Merger {
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(sources: Vec<MergeSource>, metrics: Arc<Metrics>) -> Result<Self, reqwest::Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            sources,
            metrics,
        })
    }

    /// One scrape of every source and of the relay itself, merged.
    pub async fn scrape(&self) -> String {
        let fetched =
            futures_util::future::join_all(self.sources.iter().map(|s| self.fetch(s))).await;
        let mut parts: Vec<(&str, Vec<Family>)> = Vec::with_capacity(fetched.len() + 1);
        let mut fetched_parts = Vec::new();
        // Bucket bounds written back as each exposition spelled them.
        let mut spellings: HashMap<&str, Spellings> = HashMap::new();
        for (source, (result, took)) in self.sources.iter().zip(fetched) {
            let label = SourceLabel {
                source: source.name.clone(),
            };
            self.metrics
                .merge_duration
                .get_or_create(&label)
                .set(took.as_secs_f64());
            let up = match result {
                Ok((families, text)) => {
                    spellings
                        .entry(source.name.as_str())
                        .or_default()
                        .note(&text);
                    fetched_parts.push((source.name.as_str(), families));
                    1
                }
                Err(e) => {
                    tracing::debug!(source = %source.name, error = %e, "leaving a metrics source out");
                    0
                }
            };
            self.metrics.merge_up.get_or_create(&label).set(up);
        }
        // The relay's own series last rendered, so that they show this scrape's merge_up.
        let own = self.metrics.render();
        spellings.entry(OWN_SOURCE).or_default().note(&own);
        match parse(&own, true) {
            Ok(own) => parts.push((OWN_SOURCE, own)),
            Err(e) => tracing::error!(error = %e, "cannot parse the relay's own metrics"),
        }
        parts.extend(fetched_parts);
        let (text, left_out) = merge_spelled(parts, &spellings);
        for (source, n) in left_out {
            self.metrics
                .merge_left_out
                .get_or_create(&SourceLabel {
                    source: source.to_string(),
                })
                .inc_by(n);
        }
        text
    }

    /// A source's families and its text, and how long they took.
    async fn fetch(&self, source: &MergeSource) -> (Result<Fetched, SourceError>, Duration) {
        let started = std::time::Instant::now();
        let timeout = Duration::from_millis(source.timeout_ms);
        let result = tokio::time::timeout(timeout, self.fetch_text(source))
            .await
            .unwrap_or_else(|_| Err(SourceError::Parse("timed out".into())))
            .and_then(|(text, openmetrics)| match parse(&text, openmetrics) {
                Ok(families) => Ok((families, text)),
                Err(e) => Err(SourceError::Parse(e.to_string())),
            });
        (result, started.elapsed())
    }

    /// The body, and whether it is OpenMetrics (else the Prometheus text format).
    async fn fetch_text(&self, source: &MergeSource) -> Result<(String, bool), SourceError> {
        let mut response = self
            .client
            .get(&source.url)
            .header(
                reqwest::header::ACCEPT,
                "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5",
            )
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(SourceError::Status(response.status().as_u16()));
        }
        let openmetrics = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/openmetrics-text"));
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(SourceError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(body).map_err(|_| SourceError::NotText)?;
        Ok((text, openmetrics))
    }
}

/// The OpenMetrics exposition `openmetrics` in the text format 0.0.4: counters under their
/// `_total` names, a gauge histogram as [`gauge_histogram`] writes it, bucket bounds spelled
/// as in `openmetrics`, no `# EOF`.
///
/// # Errors
/// When `openmetrics` does not parse.
pub fn text_format(openmetrics: &str) -> Result<String, openmetrics_parser::ParseError> {
    let mut spellings = Spellings::default();
    spellings.note(openmetrics);
    Ok(parse(openmetrics, true)?
        .iter()
        .map(|f| written(f, Some(&spellings)))
        .collect())
}

/// A family's text, a histogram's bounds spelled as `spellings` noted them.
fn written(f: &Family, spellings: Option<&Spellings>) -> String {
    match spellings {
        Some(s) if f.family_type == PrometheusType::Histogram => s.respell(&f.to_string()),
        _ => f.to_string(),
    }
}

/// Parses an exposition into Prometheus-typed families.
///
/// # Errors
/// When the text is not a valid exposition of its format.
pub fn parse(text: &str, openmetrics: bool) -> Result<Vec<Family>, openmetrics_parser::ParseError> {
    if openmetrics {
        let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)?;
        Ok(parsed
            .families
            .values()
            .flat_map(|f| match f.family_type {
                OpenMetricsType::GaugeHistogram => gauge_histogram(f),
                _ => from_openmetrics(f).into_iter().collect(),
            })
            .collect())
    } else {
        let parsed = openmetrics_parser::prometheus::parse_prometheus(text)?;
        Ok(parsed.families.into_values().collect())
    }
}

/// An OpenMetrics family as the Prometheus text format names it (counters end in `_total`,
/// infos in `_info` as gauges). Gauge histograms and state sets have no Prometheus form: `None`.
fn from_openmetrics(f: &MetricFamily<OpenMetricsType, OpenMetricsValue>) -> Option<Family> {
    let name = &f.family_name;
    let (name, kind) = match f.family_type {
        OpenMetricsType::Counter => (format!("{name}_total"), PrometheusType::Counter),
        OpenMetricsType::Gauge => (name.clone(), PrometheusType::Gauge),
        OpenMetricsType::Histogram => (name.clone(), PrometheusType::Histogram),
        OpenMetricsType::Summary => (name.clone(), PrometheusType::Summary),
        OpenMetricsType::Unknown => (name.clone(), PrometheusType::Unknown),
        OpenMetricsType::Info => (format!("{name}_info"), PrometheusType::Gauge),
        OpenMetricsType::GaugeHistogram | OpenMetricsType::StateSet => return None,
    };
    let mut out = Family::new(
        name,
        f.get_label_names().to_vec(),
        kind,
        f.help.clone(),
        String::new(),
    );
    for s in f.iter_samples() {
        let value = match &s.value {
            OpenMetricsValue::Counter(c) => PrometheusValue::Counter(PrometheusCounterValue {
                value: c.value,
                exemplar: None,
            }),
            OpenMetricsValue::Gauge(n) => PrometheusValue::Gauge(*n),
            OpenMetricsValue::Unknown(n) => PrometheusValue::Unknown(*n),
            OpenMetricsValue::Histogram(h) => PrometheusValue::Histogram(h.clone()),
            OpenMetricsValue::Summary(v) => PrometheusValue::Summary(v.clone()),
            OpenMetricsValue::Info => PrometheusValue::Gauge(MetricNumber::Int(1)),
            OpenMetricsValue::GaugeHistogram(_) | OpenMetricsValue::StateSet(_) => return None,
        };
        out.add_sample(Sample::new(label_values(s), s.timestamp, value))
            .ok()?;
    }
    Some(out)
}

/// A gauge histogram in the Prometheus text format, with the series bbb-exporter's client
/// writes there: its buckets `<name>_bucket{le}` under `# TYPE <name> histogram` (`le` as in
/// OpenMetrics: `1`, `+Inf`), its count and sum as `<name>_gcount` and `<name>_gsum`. Those
/// two are gauges of their own, with their own HELP and TYPE (Python's client leaves them
/// under the histogram's, which `promtool check metrics` calls a metric without help). PromQL
/// sees the same series.
fn gauge_histogram(f: &MetricFamily<OpenMetricsType, OpenMetricsValue>) -> Vec<Family> {
    let name = &f.family_name;
    let names = f.get_label_names().to_vec();
    let family = |name: String, kind: PrometheusType, help: String| {
        Family::new(name, names.clone(), kind, help, String::new())
    };
    let (mut buckets, mut count, mut sum) = (
        family(name.clone(), PrometheusType::Histogram, f.help.clone()),
        family(
            format!("{name}_gcount"),
            PrometheusType::Gauge,
            format!("{} (how many)", f.help),
        ),
        family(
            format!("{name}_gsum"),
            PrometheusType::Gauge,
            format!("{} (their sum)", f.help),
        ),
    );
    for s in f.iter_samples() {
        let OpenMetricsValue::GaugeHistogram(h) = &s.value else {
            continue;
        };
        let values = label_values(s);
        // Buckets only: a histogram's `_count` and `_sum` are counters, these are gauges.
        let _ = buckets.add_sample(Sample::new(
            values.clone(),
            s.timestamp,
            PrometheusValue::Histogram(HistogramValue {
                sum: None,
                count: None,
                created: None,
                buckets: h.buckets.clone(),
            }),
        ));
        let n = MetricNumber::Int(h.count.and_then(|c| i64::try_from(c).ok()).unwrap_or(0));
        let _ = count.add_sample(Sample::new(
            values.clone(),
            s.timestamp,
            PrometheusValue::Gauge(n),
        ));
        let total = h.sum.unwrap_or(MetricNumber::Int(0));
        let _ = sum.add_sample(Sample::new(
            values,
            s.timestamp,
            PrometheusValue::Gauge(total),
        ));
    }
    vec![buckets, count, sum]
}

fn label_values<V: openmetrics_parser::RenderableMetricValue + Clone>(
    s: &Sample<V>,
) -> Vec<String> {
    s.get_labelset()
        .map(|set| set.iter_values().cloned().collect())
        .unwrap_or_default()
}

/// The label names a part has once its `source` label is set.
fn names_with_source(f: &Family) -> impl Iterator<Item = String> + '_ {
    f.get_label_names()
        .iter()
        .map(|n| {
            if n == "source" {
                "exported_source".to_string()
            } else {
                n.clone()
            }
        })
        .chain(std::iter::once("source".to_string()))
}

/// `f` with exactly the label names `names` (sorted), its own `source` renamed, the new
/// `source` set and any label it lacks empty.
fn reshape(f: &Family, source: &str, names: &[String]) -> Option<Family> {
    let own: Vec<String> = names_with_source(f).collect();
    let mut out = Family::new(
        f.family_name.clone(),
        names.to_vec(),
        f.family_type.clone(),
        f.help.clone(),
        String::new(),
    );
    for s in f.iter_samples() {
        let values = label_values(s);
        let value_of = |name: &String| {
            if name == "source" {
                return source.to_string();
            }
            own.iter()
                .position(|n| n == name)
                .and_then(|i| values.get(i).cloned())
                .unwrap_or_default()
        };
        let sample = Sample::new(
            names.iter().map(value_of).collect(),
            s.timestamp,
            s.value.clone(),
        );
        out.add_sample(sample).ok()?;
    }
    Some(out)
}

/// Merges `(source, families)` in order (the first to name a family sets its TYPE and HELP).
/// Returns the text and, per source, how many families were left out for a TYPE clash.
pub fn merge(parts: Vec<(&str, Vec<Family>)>) -> (String, Vec<(&str, u64)>) {
    merge_spelled(parts, &HashMap::new())
}

/// [`merge`], each source's histogram bounds spelled as that source's own exposition spelled
/// them (`spellings`, by source).
fn merge_spelled<'a>(
    parts: Vec<(&'a str, Vec<Family>)>,
    spellings: &HashMap<&str, Spellings>,
) -> (String, Vec<(&'a str, u64)>) {
    let mut by_name: BTreeMap<String, Vec<(&str, Family)>> = BTreeMap::new();
    let mut left_out: Vec<(&str, u64)> = Vec::new();
    for (source, families) in parts {
        let mut families = families;
        families.sort_by(|a, b| a.family_name.cmp(&b.family_name));
        for f in families {
            let entry = by_name.entry(f.family_name.clone()).or_default();
            match entry.first() {
                Some((_, first)) if first.family_type != f.family_type => {
                    tracing::debug!(source, family = %f.family_name, "leaving out a family whose TYPE clashes");
                    match left_out.iter_mut().find(|(s, _)| *s == source) {
                        Some((_, n)) => *n += 1,
                        None => left_out.push((source, 1)),
                    }
                }
                _ => entry.push((source, f)),
            }
        }
    }
    let mut out = String::new();
    for parts in by_name.values() {
        let mut names: Vec<String> = parts
            .iter()
            .flat_map(|(_, f)| names_with_source(f))
            .collect();
        names.sort();
        names.dedup();
        for (i, (source, f)) in parts.iter().enumerate() {
            let Some(part) = reshape(f, source, &names) else {
                continue;
            };
            let text = written(&part, spellings.get(source));
            if i == 0 {
                out.push_str(&text);
            } else {
                for line in text.lines().filter(|l| !l.starts_with('#')) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    (out, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prom(text: &str) -> Vec<Family> {
        parse(text, false).expect("valid")
    }

    #[test]
    fn families_merge_under_one_header_and_clashes_are_left_out() {
        let a = prom(
            "# HELP up_things Things.\n# TYPE up_things gauge\nup_things{cpu=\"0\"} 1\nup_things{cpu=\"1\"} 2\n\
             # TYPE reqs_total counter\nreqs_total 5\n",
        );
        let b = prom(
            "# HELP up_things Other help.\n# TYPE up_things gauge\nup_things 7\n\
             # TYPE reqs_total gauge\nreqs_total 9\n# TYPE only_b untyped\nonly_b{source=\"x\"} 3\n",
        );
        let (text, left_out) = merge(vec![("a", a), ("b", b)]);
        assert_eq!(left_out, [("b", 1)]);
        assert_eq!(
            text,
            "only_b{exported_source=\"x\",source=\"b\"} 3\n\
             # TYPE reqs_total counter\nreqs_total{source=\"a\"} 5\n\
             # HELP up_things Things.\n# TYPE up_things gauge\n\
             up_things{cpu=\"0\",source=\"a\"} 1\nup_things{cpu=\"1\",source=\"a\"} 2\n\
             up_things{cpu=\"\",source=\"b\"} 7\n"
        );
        // What comes out parses again, with every family where it belongs.
        let again = prom(&text);
        assert_eq!(again.len(), 3);
    }

    #[test]
    fn openmetrics_counters_and_histograms_keep_their_prometheus_names() {
        let om = "# HELP x_requests Requests.\n# TYPE x_requests counter\nx_requests_total 3\n\
                  # TYPE lat histogram\nlat_bucket{le=\"1.0\"} 1\nlat_bucket{le=\"+Inf\"} 2\nlat_sum 3.5\nlat_count 2\n# EOF\n";
        let families = parse(om, true).expect("valid");
        let (text, _) = merge(vec![("own", families)]);
        let parsed = prom(&text);
        let names: Vec<&str> = parsed.iter().map(|f| f.family_name.as_str()).collect();
        assert!(names.contains(&"x_requests_total"), "{text}");
        assert!(names.contains(&"lat"), "{text}");
        assert!(
            text.contains("lat_bucket{source=\"own\",le=\"+Inf\"} 2"),
            "{text}"
        );
    }
}

//! The `bbb_*` series, computed from the [`Conference`](super::Conference) at each scrape,
//! with bbb-exporter's names, types, labels and bucket bounds, so that its Grafana dashboards
//! work unchanged (tested against their queries in a real Prometheus). The room histograms are
//! gauge histograms (`_bucket`, `_gcount`, `_gsum`), which the metrics crate cannot encode:
//! they are written as OpenMetrics text ([`TextFamilies`]). In a fleet only the holder of the
//! fleet lease counts the conference, so only it exports these series. The numbers themselves
//! are counted in `summary` ([`Summary`]); this file writes them. With `[[sources]]` (a pool of
//! servers) each series is one per server, labelled `server` with its source's name, and
//! `bbb_api_up` says each server's state; without, they are today's bbb-exporter series.

mod summary;

use std::{fmt::Write, sync::Arc};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::ConstCounter,
        family::Family,
        gauge::{ConstGauge, Gauge},
    },
};

use super::{RecordingState, SharedConference};
use crate::metrics::{Exports, SourceLabel, TextFamilies};

use summary::RECORDINGS;
pub(crate) use summary::Summary;

/// Upper bounds of the room histograms of participants and listeners (bbb-exporter's).
pub(crate) const ROOM_BUCKETS: [u32; 14] =
    [0, 1, 5, 15, 30, 60, 90, 120, 150, 200, 250, 300, 400, 500];
/// Upper bounds of the room histograms of voice and video participants (bbb-exporter's).
pub(crate) const MEDIA_BUCKETS: [u32; 8] = [0, 1, 5, 15, 30, 60, 90, 120];

/// The `version` of `bbb_exporter`: this relay's, marked as hookrelay's.
const EXPORTER_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-hookrelay");

/// Which server a sample is of: `None` for the one server of a relay without `[[sources]]`
/// (bbb-exporter's unlabelled series), else its source's name (the `server` label).
type Server = Option<Arc<str>>;

/// The label set of a sample of `server`, with `more` labels after it.
fn labels(server: &Server, more: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = server
        .iter()
        .map(|s| ("server".to_string(), s.to_string()))
        .collect();
    out.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabels {
    server: String,
    name: String,
}

/// What the `bbb_*` series are made from: the sources' conference states (their sum is
/// shown), each source's bus connection, and, in a fleet, whether this instance holds the
/// lease.
#[derive(Debug, Clone)]
pub struct ConferenceExport {
    /// Each configured source's name and state.
    pub states: Vec<(Arc<str>, SharedConference)>,
    /// The servers whose edges the relay takes, as they appear (always one series each).
    pub joined: super::Joined,
    /// `hookrelay_redis_connected{source}`: 1 while the source's bus is subscribed.
    pub connected: Family<SourceLabel, Gauge>,
    /// In a fleet, `hookrelay_fleet_lease_held`: only the holder counts the conference.
    pub holder: Option<Gauge>,
    /// One series per server, labelled `server` (`[[sources]]`), rather than their sum.
    pub per_server: bool,
}

impl ConferenceExport {
    /// The collector and the gauge histograms, for [`crate::metrics::Metrics::with_exports`].
    pub fn exports(self) -> Exports {
        Exports {
            collectors: vec![Box::new(self.clone())],
            texts: vec![Box::new(self)],
        }
    }

    /// Whether this instance shows the conference: outside a fleet or holding its lease, and
    /// once every source's state is known (read back after a restart, not empty until then).
    fn counting(&self) -> bool {
        self.holder.as_ref().is_none_or(|g| g.get() == 1)
            && (self.all().iter()).all(|(_, s)| s.lock().unwrap_or_else(|p| p.into_inner()).known)
    }

    /// Every source's name and state: the configured ones, then the edges' servers.
    fn all(&self) -> Vec<(Arc<str>, SharedConference)> {
        let joined = self.joined.read().unwrap_or_else(|p| p.into_inner());
        self.states.iter().chain(joined.iter()).cloned().collect()
    }

    /// One series per server: with `[[sources]]`, without a bus of its own, or once an edge's
    /// server joined.
    fn is_per_server(&self) -> bool {
        self.per_server
            || !self
                .joined
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }

    fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for (_, shared) in &self.all() {
            let c = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.add(Summary::of(&c));
        }
        s
    }

    /// What the series show: each server's numbers (`per_server`), else their sum.
    fn views(&self) -> Vec<(Server, Summary)> {
        if !self.is_per_server() {
            return vec![(None, self.summary())];
        }
        (self.all().iter())
            .map(|(name, shared)| {
                let c = shared.lock().unwrap_or_else(|p| p.into_inner());
                (Some(name.clone()), Summary::of(&c))
            })
            .collect()
    }

    /// `bbb_api_up` of each view: its bus (every source's, for the sum) is subscribed, and
    /// where `api_url` is set its last API call was answered.
    fn api_up(&self) -> Vec<(Server, bool)> {
        let up = |name: &Arc<str>, shared: &SharedConference| {
            let bus = self
                .connected
                .get_or_create(&SourceLabel {
                    source: name.to_string(),
                })
                .get()
                == 1;
            let api = shared.lock().unwrap_or_else(|p| p.into_inner()).api_up;
            bus && api != Some(false)
        };
        if !self.is_per_server() {
            let all = self.all().iter().all(|(n, s)| up(n, s));
            return vec![(None, all)];
        }
        (self.all().iter())
            .map(|(n, s)| (Some(n.clone()), up(n, s)))
            .collect()
    }
}

/// A family of samples, each of a server and with more labels: without labels at all (one
/// unlabelled sample), the sample is written as bbb-exporter writes it.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help, kind): (&str, &str, MetricType),
    samples: Vec<(Vec<(String, String)>, M)>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, m) in samples {
        if labels.is_empty() {
            m.encode(family)?;
            return Ok(());
        }
        m.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family with one sample per view, `value` of its summary.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    views: &[(Server, Summary)],
    value: impl Fn(&Summary) -> usize,
) -> std::fmt::Result {
    let samples = (views.iter())
        .map(|(server, s)| {
            let v = i64::try_from(value(s)).unwrap_or(i64::MAX);
            (labels(server, &[]), ConstGauge::new(v))
        })
        .collect();
    family(encoder, (name, help, MetricType::Gauge), samples)
}

/// A counter family with one sample per view, `value` of its summary.
fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    views: &[(Server, Summary)],
    value: impl Fn(&Summary) -> u64,
) -> std::fmt::Result {
    let samples = (views.iter())
        .map(|(server, s)| (labels(server, &[]), ConstCounter::new(value(s))))
        .collect();
    family(encoder, (name, help, MetricType::Counter), samples)
}

/// Writes a gauge histogram over rooms of one of their counts, as bbb-exporter exposes it in
/// OpenMetrics: `_bucket` per bound (`le` an integer, then `+Inf`), `_gcount` (rooms) and
/// `_gsum` (their total).
fn gauge_histogram(
    out: &mut String,
    (name, help): (&str, &str),
    bounds: &[u32],
    views: &[(Server, Vec<usize>)],
) {
    // Writing into a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gaugehistogram");
    for (server, values) in views {
        histogram_samples(out, name, server, bounds, values);
    }
}

/// One server's samples of a gauge histogram (`server` first among their labels).
fn histogram_samples(
    out: &mut String,
    name: &str,
    server: &Server,
    bounds: &[u32],
    values: &[usize],
) {
    let mut counts = vec![0usize; bounds.len()];
    let (mut sum, mut count) = (0usize, 0usize);
    for &v in values {
        sum += v;
        count += 1;
        for (bound, n) in bounds.iter().zip(counts.iter_mut()) {
            if v <= *bound as usize {
                *n += 1;
            }
        }
    }
    let (first, alone) = match server {
        Some(s) => (format!("server=\"{s}\","), format!("{{server=\"{s}\"}}")),
        None => (String::new(), String::new()),
    };
    for (bound, n) in bounds.iter().zip(&counts) {
        let _ = writeln!(out, "{name}_bucket{{{first}le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{{first}le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_gcount{alone} {count}");
    let _ = writeln!(out, "{name}_gsum{alone} {sum}");
}

impl TextFamilies for ConferenceExport {
    fn write(&self, out: &mut String) {
        if !self.counting() {
            return;
        }
        let views = self.views();
        for (i, (what, bounds)) in [
            ("participants", &ROOM_BUCKETS[..]),
            ("listeners", &ROOM_BUCKETS[..]),
            ("voice_participants", &MEDIA_BUCKETS[..]),
            ("video_participants", &MEDIA_BUCKETS[..]),
        ]
        .into_iter()
        .enumerate()
        {
            let name = format!("bbb_room_{what}");
            let help = format!(
                "BigBlueButton room {} histogram gauge",
                what.replace('_', " ")
            );
            let rooms: Vec<(Server, Vec<usize>)> = (views.iter())
                .map(|(server, s)| (server.clone(), s.rooms.iter().map(|r| r[i]).collect()))
                .collect();
            gauge_histogram(out, (&name, &help), bounds, &rooms);
        }
    }
}

impl Collector for ConferenceExport {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        if !self.counting() {
            return Ok(());
        }
        let views = self.views();
        let e = &mut e;
        exporter_version(e)?;
        let up = (self.api_up().into_iter())
            .map(|(server, up)| (labels(&server, &[]), ConstGauge::new(i64::from(up))))
            .collect();
        family(
            e,
            (
                "bbb_api_up",
                "1 while the relay reaches what it reads: the server's bus (every source's, without a server label) and, where api_url is set, BigBlueButton's API",
                MetricType::Gauge,
            ),
            up,
        )?;
        totals(e, &views)?;
        clients(e, &views)?;
        // Its `server` label is the meeting's origin (bbb-exporter's): summed over servers.
        origins(e, &self.summary())?;
        recordings(e, &views)?;
        counter(
            e,
            "bbb_unique_meetings",
            "Unique non-breakout meetings since the relay started",
            &views,
            |s| s.unique_meetings,
        )?;
        counter(
            e,
            "bbb_unique_breakout_rooms",
            "Unique breakout rooms since the relay started",
            &views,
            |s| s.unique_breakout_rooms,
        )?;
        Ok(())
    }
}

/// `bbb_exporter{version}`: which exporter made the `bbb_*` series (this relay).
fn exporter_version(e: &mut DescriptorEncoder) -> std::fmt::Result {
    let mut family = e.encode_descriptor(
        "bbb_exporter",
        "Version of the exporter of the bbb_* series (hookrelay)",
        None,
        MetricType::Gauge,
    )?;
    let label = VersionLabel {
        version: EXPORTER_VERSION.into(),
    };
    ConstGauge::new(1).encode(family.encode_family(&label)?)
}

/// The totals over all meetings: meetings, breakout rooms, participants (all and the most in
/// one meeting), listeners, voice and video participants.
fn totals(e: &mut DescriptorEncoder, views: &[(Server, Summary)]) -> std::fmt::Result {
    type Value = fn(&Summary) -> usize;
    let families: [(&str, &str, Value); 7] = [
        (
            "bbb_meetings",
            "Number of BigBlueButton meetings (breakout rooms included)",
            |s| s.meetings,
        ),
        (
            "bbb_breakout_rooms",
            "Number of running breakout rooms (also in bbb_meetings)",
            |s| s.breakout_rooms,
        ),
        (
            "bbb_meetings_participants",
            "Total number of participants in all BigBlueButton meetings",
            |s| s.participants,
        ),
        (
            "bbb_meetings_participants_max",
            "Participants of the BigBlueButton meeting with the most",
            |s| s.participants_max,
        ),
        (
            "bbb_meetings_listeners",
            "Total number of listeners in all BigBlueButton meetings",
            |s| s.listeners,
        ),
        (
            "bbb_meetings_voice_participants",
            "Total number of voice participants in all BigBlueButton meetings",
            |s| s.voice,
        ),
        (
            "bbb_meetings_video_participants",
            "Total number of video participants (camera streams) in all BigBlueButton meetings",
            |s| s.video,
        ),
    ];
    for (name, help, value) in families {
        gauge(e, name, help, views, value)?;
    }
    Ok(())
}

/// `bbb_meetings_participant_clients{type}`: participants by client.
fn clients(e: &mut DescriptorEncoder, views: &[(Server, Summary)]) -> std::fmt::Result {
    let samples = (views.iter())
        .flat_map(|(server, s)| {
            s.clients.iter().map(move |(client, n)| {
                let n = i64::try_from(*n).unwrap_or(i64::MAX);
                (labels(server, &[("type", client)]), ConstGauge::new(n))
            })
        })
        .collect();
    family(
        e,
        (
            "bbb_meetings_participant_clients",
            "Total number of participants in all BigBlueButton meetings by client",
            MetricType::Gauge,
        ),
        samples,
    )
}

/// `bbb_meetings_participants_origin{server,name}`: participants by their meeting's origin.
fn origins(e: &mut DescriptorEncoder, s: &Summary) -> std::fmt::Result {
    // Without a meeting with participants the family has no sample: not written (an empty
    // family is valid OpenMetrics, but not every parser takes it).
    if s.origins.is_empty() {
        return Ok(());
    }
    let mut family = e.encode_descriptor(
        "bbb_meetings_participants_origin",
        "Participants of BigBlueButton meetings by their origin (the meeting's bbb-origin-server-name and bbb-origin metadata, lowercase)",
        None,
        MetricType::Gauge,
    )?;
    for (origin, n) in &s.origins {
        let labels = OriginLabels {
            server: origin.server.clone(),
            name: origin.name.clone(),
        };
        let n = i64::try_from(*n).unwrap_or(i64::MAX);
        ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// `bbb_recordings_<state>`: the recordings in each state.
fn recordings(e: &mut DescriptorEncoder, views: &[(Server, Summary)]) -> std::fmt::Result {
    for (i, state) in RECORDINGS.iter().enumerate() {
        let help = match state {
            RecordingState::Unprocessed => {
                "Number of BigBlueButton recordings archived and checked, waiting to be processed (from the recording pipeline's events)".to_string()
            }
            other => format!(
                "Number of BigBlueButton recordings {} (from the recording pipeline's events)",
                other.as_str()
            ),
        };
        let name = format!("bbb_recordings_{}", state.as_str());
        gauge(e, &name, &help, views, |s| s.recordings[i])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! The `bbb_*` series, computed from the [`Conference`](super::Conference) at each scrape,
//! with bbb-exporter's names, types, labels and bucket bounds, so that its Grafana dashboards
//! work unchanged (tested against their queries in a real Prometheus). The room histograms are
//! gauge histograms (`_bucket`, `_gcount`, `_gsum`), which the metrics crate cannot encode:
//! they are written as OpenMetrics text ([`TextFamilies`]). In a fleet only the holder of the
//! fleet lease counts the conference, so only it exports these series. The numbers themselves
//! are counted in `summary` ([`Summary`]); this file writes them.

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
pub use summary::Summary;

/// Upper bounds of the room histograms of participants and listeners (bbb-exporter's).
pub const ROOM_BUCKETS: [u32; 14] = [0, 1, 5, 15, 30, 60, 90, 120, 150, 200, 250, 300, 400, 500];
/// Upper bounds of the room histograms of voice and video participants (bbb-exporter's).
pub const MEDIA_BUCKETS: [u32; 8] = [0, 1, 5, 15, 30, 60, 90, 120];

/// The `version` of `bbb_exporter`: this relay's, marked as hookrelay's.
const EXPORTER_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-hookrelay");

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: String,
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
    /// Each source's name and state.
    pub states: Vec<(Arc<str>, SharedConference)>,
    /// `hookrelay_redis_connected{source}`: 1 while the source's bus is subscribed.
    pub connected: Family<SourceLabel, Gauge>,
    /// In a fleet, `hookrelay_fleet_lease_held`: only the holder counts the conference.
    pub holder: Option<Gauge>,
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
            && (self.states.iter()).all(|(_, s)| s.lock().unwrap_or_else(|p| p.into_inner()).known)
    }

    fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for (_, shared) in &self.states {
            let c = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.add(Summary::of(&c));
        }
        s
    }

    /// `bbb_api_up`: every source's bus is subscribed, and every source with `api_url` had
    /// its last API call answered.
    fn api_up(&self) -> bool {
        self.states.iter().all(|(name, shared)| {
            let bus = self
                .connected
                .get_or_create(&SourceLabel {
                    source: name.to_string(),
                })
                .get()
                == 1;
            let api = shared.lock().unwrap_or_else(|p| p.into_inner()).api_up;
            bus && api != Some(false)
        })
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, v: usize) -> std::fmt::Result {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)).encode(metric)
}

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(v).encode(metric)
}

/// Writes a gauge histogram over rooms of one of their counts, as bbb-exporter exposes it in
/// OpenMetrics: `_bucket` per bound (`le` an integer, then `+Inf`), `_gcount` (rooms) and
/// `_gsum` (their total).
fn gauge_histogram(
    out: &mut String,
    name: &str,
    help: &str,
    bounds: &[u32],
    values: impl Iterator<Item = usize>,
) {
    let mut counts = vec![0usize; bounds.len()];
    let (mut sum, mut count) = (0usize, 0usize);
    for v in values {
        sum += v;
        count += 1;
        for (bound, n) in bounds.iter().zip(counts.iter_mut()) {
            if v <= *bound as usize {
                *n += 1;
            }
        }
    }
    // Writing into a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gaugehistogram");
    for (bound, n) in bounds.iter().zip(&counts) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_gcount {count}");
    let _ = writeln!(out, "{name}_gsum {sum}");
}

impl TextFamilies for ConferenceExport {
    fn write(&self, out: &mut String) {
        if !self.counting() {
            return;
        }
        let s = self.summary();
        let room = |i: usize| s.rooms.iter().map(move |r| r[i]);
        for (i, (what, bounds)) in [
            ("participants", &ROOM_BUCKETS[..]),
            ("listeners", &ROOM_BUCKETS[..]),
            ("voice_participants", &MEDIA_BUCKETS[..]),
            ("video_participants", &MEDIA_BUCKETS[..]),
        ]
        .into_iter()
        .enumerate()
        {
            gauge_histogram(
                out,
                &format!("bbb_room_{what}"),
                &format!(
                    "BigBlueButton room {} histogram gauge",
                    what.replace('_', " ")
                ),
                bounds,
                room(i),
            );
        }
    }
}

impl Collector for ConferenceExport {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        if !self.counting() {
            return Ok(());
        }
        let s = self.summary();
        let e = &mut e;
        exporter_version(e)?;
        gauge(
            e,
            "bbb_api_up",
            "1 while the relay reaches what it reads: every source's bus and, where api_url is set, BigBlueButton's API",
            usize::from(self.api_up()),
        )?;
        totals(e, &s)?;
        clients(e, &s)?;
        origins(e, &s)?;
        recordings(e, &s)?;
        counter(
            e,
            "bbb_unique_meetings",
            "Unique non-breakout meetings since the relay started",
            s.unique_meetings,
        )?;
        counter(
            e,
            "bbb_unique_breakout_rooms",
            "Unique breakout rooms since the relay started",
            s.unique_breakout_rooms,
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
fn totals(e: &mut DescriptorEncoder, s: &Summary) -> std::fmt::Result {
    gauge(
        e,
        "bbb_meetings",
        "Number of BigBlueButton meetings (breakout rooms included)",
        s.meetings,
    )?;
    gauge(
        e,
        "bbb_breakout_rooms",
        "Number of running breakout rooms (also in bbb_meetings)",
        s.breakout_rooms,
    )?;
    gauge(
        e,
        "bbb_meetings_participants",
        "Total number of participants in all BigBlueButton meetings",
        s.participants,
    )?;
    gauge(
        e,
        "bbb_meetings_participants_max",
        "Participants of the BigBlueButton meeting with the most",
        s.participants_max,
    )?;
    gauge(
        e,
        "bbb_meetings_listeners",
        "Total number of listeners in all BigBlueButton meetings",
        s.listeners,
    )?;
    gauge(
        e,
        "bbb_meetings_voice_participants",
        "Total number of voice participants in all BigBlueButton meetings",
        s.voice,
    )?;
    gauge(
        e,
        "bbb_meetings_video_participants",
        "Total number of video participants (camera streams) in all BigBlueButton meetings",
        s.video,
    )
}

/// `bbb_meetings_participant_clients{type}`: participants by client.
fn clients(e: &mut DescriptorEncoder, s: &Summary) -> std::fmt::Result {
    let mut family = e.encode_descriptor(
        "bbb_meetings_participant_clients",
        "Total number of participants in all BigBlueButton meetings by client",
        None,
        MetricType::Gauge,
    )?;
    for (client, n) in &s.clients {
        let label = TypeLabel {
            r#type: client.clone(),
        };
        let n = i64::try_from(*n).unwrap_or(i64::MAX);
        ConstGauge::new(n).encode(family.encode_family(&label)?)?;
    }
    Ok(())
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
fn recordings(e: &mut DescriptorEncoder, s: &Summary) -> std::fmt::Result {
    for (state, n) in RECORDINGS.iter().zip(s.recordings) {
        let help = match state {
            RecordingState::Unprocessed => {
                "Number of BigBlueButton recordings archived and checked, waiting to be processed (from the recording pipeline's events)".to_string()
            }
            other => format!(
                "Number of BigBlueButton recordings {} (from the recording pipeline's events)",
                other.as_str()
            ),
        };
        gauge(e, &format!("bbb_recordings_{}", state.as_str()), &help, n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

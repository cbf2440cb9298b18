//! The `bbb_*` series, computed from the [`Conference`] at each scrape, with bbb-exporter's
//! names, types, labels and bucket bounds, so that its Grafana dashboards work unchanged
//! (tested against their queries in a real Prometheus). The room histograms are gauge
//! histograms (`_bucket`, `_gcount`, `_gsum`), which the metrics crate cannot encode: they are
//! written as OpenMetrics text ([`TextFamilies`]). In a fleet only the holder of the fleet
//! lease counts the conference, so only it exports these series.

use std::{collections::BTreeMap, fmt::Write, sync::Arc};

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

use super::{Conference, Origin, Recording, SharedConference};
use crate::metrics::{Exports, SourceLabel, TextFamilies};

/// Upper bounds of the room histograms of participants and listeners (bbb-exporter's).
pub const ROOM_BUCKETS: [u32; 14] = [0, 1, 5, 15, 30, 60, 90, 120, 150, 200, 250, 300, 400, 500];
/// Upper bounds of the room histograms of voice and video participants (bbb-exporter's).
pub const MEDIA_BUCKETS: [u32; 8] = [0, 1, 5, 15, 30, 60, 90, 120];

/// The client types always shown, as bbb-exporter does (zero when nobody uses them).
const CLIENTS: [&str; 3] = ["html5", "dial-in", "flash"];

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

/// The numbers one scrape shows.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub meetings: usize,
    pub breakout_rooms: usize,
    pub participants: usize,
    pub participants_max: usize,
    pub listeners: usize,
    pub voice: usize,
    pub video: usize,
    pub clients: Vec<(String, usize)>,
    /// Participants by the origin of their meeting (meetings without participants left out).
    pub origins: BTreeMap<Origin, usize>,
    /// Per room: participants, listeners, voice, video.
    pub rooms: Vec<[usize; 4]>,
    /// Unprocessed, processing, processed, published, unpublished, deleted.
    pub recordings: [usize; 6],
    pub unique_meetings: u64,
    pub unique_breakout_rooms: u64,
}

/// The recording states in [`Summary::recordings`]' order.
const RECORDINGS: [Recording; 6] = [
    Recording::Unprocessed,
    Recording::Processing,
    Recording::Processed,
    Recording::Published,
    Recording::Unpublished,
    Recording::Deleted,
];

impl Summary {
    pub fn of(c: &Conference) -> Self {
        let mut s = Summary {
            meetings: c.rooms.len(),
            unique_meetings: c.unique_meetings,
            unique_breakout_rooms: c.unique_breakout_rooms,
            ..Summary::default()
        };
        let mut clients: Vec<(String, usize)> =
            CLIENTS.iter().map(|c| (c.to_string(), 0)).collect();
        for room in c.rooms.values() {
            s.breakout_rooms += usize::from(room.breakout);
            let counts = [
                room.users.len(),
                room.listeners.len(),
                room.voice.len(),
                room.streams.len(),
            ];
            s.participants += counts[0];
            s.participants_max = s.participants_max.max(counts[0]);
            s.listeners += counts[1];
            s.voice += counts[2];
            s.video += counts[3];
            s.rooms.push(counts);
            if counts[0] > 0 {
                *s.origins
                    .entry(room.origin.clone().unwrap_or_default())
                    .or_default() += counts[0];
            }
            for client in room.users.values() {
                match clients.iter_mut().find(|(c, _)| c == client) {
                    Some((_, n)) => *n += 1,
                    None => clients.push((client.clone(), 1)),
                }
            }
        }
        s.clients = clients;
        for state in c.recordings.values() {
            if let Some(i) = RECORDINGS.iter().position(|r| r == state) {
                s.recordings[i] += 1;
            }
        }
        s
    }

    /// Adds `other`'s numbers to these.
    pub fn add(&mut self, other: Summary) {
        self.meetings += other.meetings;
        self.breakout_rooms += other.breakout_rooms;
        self.participants += other.participants;
        self.participants_max = self.participants_max.max(other.participants_max);
        self.listeners += other.listeners;
        self.voice += other.voice;
        self.video += other.video;
        for (client, n) in other.clients {
            match self.clients.iter_mut().find(|(c, _)| *c == client) {
                Some((_, m)) => *m += n,
                None => self.clients.push((client, n)),
            }
        }
        for (origin, n) in other.origins {
            *self.origins.entry(origin).or_default() += n;
        }
        self.rooms.extend(other.rooms);
        for (mine, theirs) in self.recordings.iter_mut().zip(other.recordings) {
            *mine += theirs;
        }
        self.unique_meetings += other.unique_meetings;
        self.unique_breakout_rooms += other.unique_breakout_rooms;
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
        {
            let mut family = e.encode_descriptor(
                "bbb_exporter",
                "Version of the exporter of the bbb_* series (hookrelay)",
                None,
                MetricType::Gauge,
            )?;
            let label = VersionLabel {
                version: EXPORTER_VERSION.into(),
            };
            ConstGauge::new(1).encode(family.encode_family(&label)?)?;
        }
        gauge(
            e,
            "bbb_api_up",
            "1 while the relay reaches what it reads: every source's bus and, where api_url is set, BigBlueButton's API",
            usize::from(self.api_up()),
        )?;
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
        )?;
        {
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
        }
        // Without a meeting with participants the family has no sample: not written (an empty
        // family is valid OpenMetrics, but not every parser takes it).
        if !s.origins.is_empty() {
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
        }
        for (state, n) in RECORDINGS.iter().zip(s.recordings) {
            let help = match state {
                Recording::Unprocessed => {
                    "Number of BigBlueButton recordings archived and checked, waiting to be processed (from the recording pipeline's events)".to_string()
                }
                other => format!(
                    "Number of BigBlueButton recordings {} (from the recording pipeline's events)",
                    other.as_str()
                ),
            };
            gauge(e, &format!("bbb_recordings_{}", state.as_str()), &help, n)?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_histogram_counts_rooms_per_bound_and_writes_gcount_and_gsum() {
        let mut out = String::new();
        gauge_histogram(
            &mut out,
            "x",
            "help",
            &MEDIA_BUCKETS,
            [0, 3, 200].into_iter(),
        );
        let want = "# HELP x help\n# TYPE x gaugehistogram\n\
            x_bucket{le=\"0\"} 1\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"5\"} 2\n\
            x_bucket{le=\"15\"} 2\nx_bucket{le=\"30\"} 2\nx_bucket{le=\"60\"} 2\n\
            x_bucket{le=\"90\"} 2\nx_bucket{le=\"120\"} 2\nx_bucket{le=\"+Inf\"} 3\n\
            x_gcount 3\nx_gsum 203\n";
        assert_eq!(out, want);
    }

    /// The relay's whole exposition with the conference in it parses as OpenMetrics (the
    /// merged endpoint parses it too), with no meeting and with one.
    #[test]
    fn the_exposition_parses_as_openmetrics_empty_or_not() {
        let state: SharedConference = Default::default();
        let m = crate::metrics::Metrics::with_exports(|m| {
            ConferenceExport {
                states: vec![(Arc::from("default"), state.clone())],
                connected: m.bus.connected.clone(),
                holder: None,
            }
            .exports()
        });
        // Before the state is read back, none of it shows: not an empty server.
        assert!(!m.render().contains("bbb_"), "{}", m.render());
        (state.lock().unwrap()).restore(
            Default::default(),
            Default::default(),
            &Default::default(),
            1,
        );
        assert!(m.render().contains("\nbbb_meetings 0\n"), "{}", m.render());
        let parse = |text: &str| {
            openmetrics_parser::openmetrics::parse_openmetrics(text)
                .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
        };
        let empty = parse(&m.render());
        assert!(
            !empty
                .families
                .contains_key("bbb_meetings_participants_origin")
        );
        let mut room = super::super::Room {
            origin: Some(Origin {
                server: "lms".into(),
                name: "moodle".into(),
            }),
            ..Default::default()
        };
        room.users.insert("u".into(), "html5".into());
        state.lock().unwrap().rooms.insert("m".into(), room);
        let text = m.render();
        let parsed = parse(&text);
        assert!(parsed.families.contains_key("bbb_room_participants"));
        assert!(text.contains("bbb_room_participants_gcount 1\n"));
        assert!(text.contains(r#"bbb_meetings_participants_origin{server="lms",name="moodle"} 1"#));
        assert!(text.ends_with("# EOF\n"));
    }
}

//! The `bbb_*` series, computed from the [`Conference`] at each scrape, with bbb-exporter's
//! names and types so that its Grafana dashboards work unchanged.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

use super::{Conference, Recording, SharedConference};

/// Upper bounds of the per-room histograms (bbb-exporter's participant buckets).
pub const ROOM_BUCKETS: [f64; 14] = [
    0.0, 1.0, 5.0, 15.0, 30.0, 60.0, 90.0, 120.0, 150.0, 200.0, 250.0, 300.0, 400.0, 500.0,
];

/// The client types always shown, as bbb-exporter does (zero when nobody uses them).
const CLIENTS: [&str; 3] = ["html5", "dial-in", "flash"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: String,
}

/// Registered with the metrics registry; reads the shared states (one per source) when
/// scraped and shows their sum: the `bbb_*` series of a fleet are its totals.
#[derive(Debug)]
pub struct ConferenceCollector(pub Vec<SharedConference>);

/// The numbers one scrape shows.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub meetings: usize,
    pub breakout_rooms: usize,
    pub participants: usize,
    pub listeners: usize,
    pub voice: usize,
    pub video: usize,
    pub clients: Vec<(String, usize)>,
    /// Per room: participants, listeners, voice, video.
    pub rooms: Vec<[usize; 4]>,
    pub recordings: [usize; 4],
    pub unique_meetings: u64,
    pub unique_breakout_rooms: u64,
}

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
            s.listeners += counts[1];
            s.voice += counts[2];
            s.video += counts[3];
            s.rooms.push(counts);
            for client in room.users.values() {
                match clients.iter_mut().find(|(c, _)| c == client) {
                    Some((_, n)) => *n += 1,
                    None => clients.push((client.clone(), 1)),
                }
            }
        }
        s.clients = clients;
        for state in c.recordings.values() {
            let i = match state {
                Recording::Processing => 0,
                Recording::Published => 1,
                Recording::Unpublished => 2,
                Recording::Deleted => 3,
            };
            s.recordings[i] += 1;
        }
        s
    }

    /// Adds `other`'s numbers to these.
    pub fn add(&mut self, other: Summary) {
        self.meetings += other.meetings;
        self.breakout_rooms += other.breakout_rooms;
        self.participants += other.participants;
        self.listeners += other.listeners;
        self.voice += other.voice;
        self.video += other.video;
        for (client, n) in other.clients {
            match self.clients.iter_mut().find(|(c, _)| *c == client) {
                Some((_, m)) => *m += n,
                None => self.clients.push((client, n)),
            }
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
    ConstGauge::new(v as i64).encode(metric)
}

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(v).encode(metric)
}

/// A histogram over rooms of one of their counts.
fn rooms_histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: impl Iterator<Item = usize>,
) -> std::fmt::Result {
    let mut buckets: Vec<(f64, u64)> = ROOM_BUCKETS
        .iter()
        .map(|b| (*b, 0))
        .chain(std::iter::once((f64::INFINITY, 0)))
        .collect();
    let (mut sum, mut count) = (0.0, 0);
    for v in values {
        let v = v as f64;
        sum += v;
        count += 1;
        if let Some(b) = buckets.iter_mut().find(|(le, _)| v <= *le) {
            b.1 += 1;
        }
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<Vec<(String, String)>>(sum, count, &buckets, None)
}

impl Collector for ConferenceCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let mut s = Summary::default();
        for shared in &self.0 {
            let c = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.add(Summary::of(&c));
        }
        let e = &mut e;
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
                ConstGauge::new(*n as i64).encode(family.encode_family(&label)?)?;
            }
        }
        let room = |i: usize| s.rooms.iter().map(move |r| r[i]);
        rooms_histogram(
            e,
            "bbb_room_participants",
            "BigBlueButton room participants histogram",
            room(0),
        )?;
        rooms_histogram(
            e,
            "bbb_room_listeners",
            "BigBlueButton room listeners histogram",
            room(1),
        )?;
        rooms_histogram(
            e,
            "bbb_room_voice_participants",
            "BigBlueButton room voice participants histogram",
            room(2),
        )?;
        rooms_histogram(
            e,
            "bbb_room_video_participants",
            "BigBlueButton room video participants histogram",
            room(3),
        )?;
        for (i, state) in ["processing", "published", "unpublished", "deleted"]
            .iter()
            .enumerate()
        {
            gauge(
                e,
                &format!("bbb_recordings_{state}"),
                &format!("Number of BigBlueButton recordings {state} (as seen on the bus)"),
                s.recordings[i],
            )?;
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

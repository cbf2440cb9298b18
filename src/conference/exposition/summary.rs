//! The numbers one scrape shows ([`Summary`]), counted from each source's [`Conference`] and
//! summed over the sources.

use std::collections::BTreeMap;

use crate::conference::{Conference, Origin, RecordingState};

/// The client types always shown, as bbb-exporter does (zero when nobody uses them).
const CLIENTS: [&str; 3] = ["html5", "dial-in", "flash"];

/// The numbers one scrape shows.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Summary {
    pub(crate) meetings: usize,
    pub(crate) breakout_rooms: usize,
    pub(crate) participants: usize,
    pub(super) participants_max: usize,
    pub(crate) listeners: usize,
    pub(crate) voice: usize,
    pub(crate) video: usize,
    pub(crate) clients: Vec<(String, usize)>,
    /// Participants by the origin of their meeting (meetings without participants left out).
    pub(super) origins: BTreeMap<Origin, usize>,
    /// Per room: participants, listeners, voice, video.
    pub(crate) rooms: Vec<[usize; 4]>,
    /// Unprocessed, processing, processed, published, unpublished, deleted.
    pub(crate) recordings: [usize; 6],
    pub(crate) unique_meetings: u64,
    pub(crate) unique_breakout_rooms: u64,
}

/// The recording states in [`Summary::recordings`]' order.
pub(super) const RECORDINGS: [RecordingState; 6] = [
    RecordingState::Unprocessed,
    RecordingState::Processing,
    RecordingState::Processed,
    RecordingState::Published,
    RecordingState::Unpublished,
    RecordingState::Deleted,
];

impl Summary {
    pub(crate) fn of(c: &Conference) -> Self {
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
    pub(crate) fn add(&mut self, other: Summary) {
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

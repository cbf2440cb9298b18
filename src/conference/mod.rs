//! The conference server's state as the bus shows it, for the `bbb_*` metrics that the
//! community exporter (bbb-exporter) computes from `getMeetings`: who is in which meeting, on
//! which client, in the voice conference (speaking or listen-only), with which camera streams;
//! and the recordings' states. Set semantics: a repeated join counts once, an unknown leave
//! does nothing, a meeting's entry goes when it ends or after the mapping timeout without
//! events. Changes are buffered and written to Redis with the batch they belong to
//! ([`persist`]); [`exposition`] renders the metrics at scrape time; [`seed`] can take the
//! meetings from BBB's `getMeetings` when the bus is (re)subscribed.

pub mod exposition;
pub mod persist;
pub mod seed;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::{Arc, Mutex},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{
    catalogue::Mapped,
    decode::{Message, flag},
};

/// One running meeting (a breakout room is one too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Room {
    pub breakout: bool,
    /// Where it was created from: its `bbb-origin-server-name` and `bbb-origin` metadata,
    /// lowercase (bbb-exporter's `bbb_meetings_participants_origin{server,name}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// User id -> client type (`html5`, `dial-in`, ...).
    pub users: BTreeMap<String, String>,
    /// Users in the voice conference listening only.
    pub listeners: BTreeSet<String>,
    /// Users in the voice conference with a microphone.
    pub voice: BTreeSet<String>,
    /// Camera stream id -> its user.
    pub streams: BTreeMap<String, String>,
    /// Last event of the meeting (ms); not stored, reset to the restore time.
    #[serde(skip)]
    pub last_activity_ms: u64,
    /// Its `meeting-created` was counted in the unique counters (a room known from
    /// `getMeetings` first is counted when its creation arrives).
    #[serde(skip)]
    pub counted: bool,
}

/// A meeting's origin, from its metadata (empty when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Origin {
    pub server: String,
    pub name: String,
}

impl Origin {
    /// From a meeting's metadata (a JSON object, or the pairs of `getMeetings`): `None` when
    /// it names neither, as bbb-exporter counts such a meeting under empty labels.
    pub fn from_metadata<'a>(mut get: impl FnMut(&str) -> Option<&'a str>) -> Option<Self> {
        let server = get("bbb-origin-server-name")
            .unwrap_or_default()
            .to_lowercase();
        let name = get("bbb-origin").unwrap_or_default().to_lowercase();
        (!server.is_empty() || !name.is_empty()).then_some(Self { server, name })
    }
}

/// One user's part of a room, stored as one field of the room's member hash in Redis, so that
/// a change costs the user's size, not the room's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Member {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// `voice` or `listen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<String>,
}

impl Room {
    /// The user's part of the room; `None` when nothing of them is there.
    pub fn member(&self, uid: &str) -> Option<Member> {
        let audio = if self.voice.contains(uid) {
            Some("voice")
        } else if self.listeners.contains(uid) {
            Some("listen")
        } else {
            None
        };
        let m = Member {
            client: self.users.get(uid).cloned(),
            audio: audio.map(String::from),
            streams: self
                .streams
                .iter()
                .filter(|(_, owner)| *owner == uid)
                .map(|(s, _)| s.clone())
                .collect(),
        };
        (m != Member::default()).then_some(m)
    }

    /// Every user with something in the room.
    pub fn members(&self) -> Vec<(String, Member)> {
        let uids: BTreeSet<&String> = self
            .users
            .keys()
            .chain(&self.listeners)
            .chain(&self.voice)
            .chain(self.streams.values())
            .collect();
        uids.into_iter()
            .filter_map(|u| Some((u.clone(), self.member(u)?)))
            .collect()
    }

    /// Adds a stored member back.
    pub fn add_member(&mut self, uid: &str, m: Member) {
        if let Some(c) = m.client {
            self.users.insert(uid.to_string(), c);
        }
        match m.audio.as_deref() {
            Some("voice") => {
                self.voice.insert(uid.to_string());
            }
            Some("listen") => {
                self.listeners.insert(uid.to_string());
            }
            _ => {}
        }
        for s in m.streams {
            self.streams.insert(s, uid.to_string());
        }
    }

    /// The room without its users (what the rooms hash stores).
    pub fn header(&self) -> Room {
        Room {
            breakout: self.breakout,
            origin: self.origin.clone(),
            counted: self.counted,
            ..Room::default()
        }
    }

    /// Whether `other` is the same meeting with the same people in the same state.
    fn same_people(&self, other: &Room) -> bool {
        self.breakout == other.breakout
            && self.origin == other.origin
            && self.users == other.users
            && self.listeners == other.listeners
            && self.voice == other.voice
            && self.streams == other.streams
    }

    /// Whether anything of the user was there.
    fn leave(&mut self, uid: &str) -> bool {
        let was = self.users.remove(uid).is_some();
        let audio = self.listeners.remove(uid) | self.voice.remove(uid);
        let cameras = self.streams.len();
        self.streams.retain(|_, owner| owner != uid);
        was || audio || cameras != self.streams.len()
    }
}

/// Where a recording is, from the recording pipeline's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recording {
    /// Recorded and checked (archive, sanity), waiting to be processed: bbb-exporter's
    /// `bbb_recordings_unprocessed` (its `recording/status/sanity` entries).
    Unprocessed,
    Processing,
    /// Processed, not (yet) published: `getRecordings?state=processed`.
    Processed,
    Published,
    Unpublished,
    Deleted,
}

impl Recording {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unprocessed => "unprocessed",
            Self::Processing => "processing",
            Self::Processed => "processed",
            Self::Published => "published",
            Self::Unpublished => "unpublished",
            Self::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Unprocessed,
            Self::Processing,
            Self::Processed,
            Self::Published,
            Self::Unpublished,
            Self::Deleted,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The state an event moves a recording to.
    fn after(event_id: &str) -> Option<Self> {
        match event_id {
            "rap-published"
            | "rap-publish-ended"
            | "rap-post-publish-started"
            | "rap-post-publish-ended" => Some(Self::Published),
            "rap-process-ended" | "rap-post-process-started" | "rap-post-process-ended" => {
                Some(Self::Processed)
            }
            "rap-unpublished" => Some(Self::Unpublished),
            "rap-deleted" => Some(Self::Deleted),
            id if id.starts_with("rap-archive-")
                || id.starts_with("rap-sanity-")
                || id.starts_with("rap-post-archive-") =>
            {
                Some(Self::Unprocessed)
            }
            id if id.starts_with("rap-") => Some(Self::Processing),
            _ => None,
        }
    }
}

/// The whole state, and what changed since the last [`Conference::take_changes`].
#[derive(Debug, Default)]
pub struct Conference {
    pub rooms: HashMap<String, Room>,
    pub recordings: HashMap<String, Recording>,
    /// Non-breakout meetings and breakout rooms created since the relay started.
    pub unique_meetings: u64,
    pub unique_breakout_rooms: u64,
    /// Whether the last call of the source's BBB API (`getMeetings`) was answered; `None`
    /// without `api_url`, or before the first call.
    pub api_up: Option<bool>,
    /// Whether the state is known: read back from the store at start-up or seeded from
    /// `getMeetings`. Until then nothing of it is exported: an empty server for a scrape
    /// would show on every dashboard as a drop to zero.
    pub known: bool,
    /// Rooms to write whole (created, ended, seeded, expired).
    changed_rooms: HashSet<String>,
    /// (meeting, user) pairs whose part changed in a room not written whole.
    changed_users: HashSet<(String, String)>,
    changed_recordings: HashSet<String>,
}

/// Shared between the processing task (writes) and the metrics endpoint (reads).
pub type SharedConference = Arc<Mutex<Conference>>;

impl crate::event::process::Observer for Mutex<Conference> {
    fn observe(&self, msg: &Message, mapped: &Mapped, now_ms: u64) {
        self.lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(msg, mapped, now_ms);
    }
}

/// What to write to Redis: rooms to store whole (`Some`) or delete (`None`), users' parts of
/// rooms to store or delete, recordings to store or delete.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub rooms: Vec<(String, Option<Room>)>,
    pub users: Vec<(String, String, Option<Member>)>,
    pub recordings: Vec<(String, Option<Recording>)>,
}

impl Conference {
    /// Applies one processed event (`msg` is its bus message, for fields the event omits).
    pub fn observe(&mut self, msg: &Message, mapped: &Mapped, now_ms: u64) {
        let id = &*mapped.id;
        if let Some(state) = Recording::after(id) {
            if let Some(record) = mapped.attributes.get("record-id").and_then(Value::as_str) {
                self.set_recording(record, state);
            }
            return;
        }
        let Some(mid) = mapped.meeting_field("internal-meeting-id") else {
            return;
        };
        match id {
            "meeting-created" => {
                let counted = self.rooms.get(mid).is_some_and(|r| r.counted);
                if !counted {
                    let breakout = mapped
                        .attributes
                        .get("meeting")
                        .and_then(|m| m.get("is-breakout"))
                        .is_some_and(flag);
                    if breakout {
                        self.unique_breakout_rooms += 1;
                    } else {
                        self.unique_meetings += 1;
                    }
                    let metadata = mapped
                        .attributes
                        .get("meeting")
                        .and_then(|m| m.get("metadata"));
                    let origin = Origin::from_metadata(|key| {
                        metadata.and_then(|m| m.get(key)).and_then(Value::as_str)
                    });
                    let room = self.rooms.entry(mid.to_string()).or_default();
                    room.breakout = breakout;
                    room.origin = origin;
                    room.counted = true;
                    room.last_activity_ms = now_ms;
                    self.changed_rooms.insert(mid.to_string());
                }
                return;
            }
            "meeting-ended" => {
                if self.rooms.remove(mid).is_some() {
                    self.changed_rooms.insert(mid.to_string());
                }
                return;
            }
            _ => {}
        }
        let Some(uid) = mapped.user_id() else {
            if let Some(room) = self.rooms.get_mut(mid) {
                room.last_activity_ms = now_ms;
            }
            return;
        };
        // Each change is seen from its own operation: cloning a room to compare would cost
        // its size on every event.
        let is_new = !self.rooms.contains_key(mid);
        let room = match id {
            // A meeting whose creation the relay did not see (it started mid-meeting) appears
            // with its first join.
            "user-joined" => self.rooms.entry(mid.to_string()).or_default(),
            _ => match self.rooms.get_mut(mid) {
                Some(room) => room,
                None => return,
            },
        };
        room.last_activity_ms = now_ms;
        let user = |key: &str| mapped.attributes.get("user").and_then(|u| u.get(key));
        let changed = match id {
            "user-joined" => {
                let client = client_type(msg.body_field("clientType"));
                if room.users.get(uid) == Some(&client) {
                    false
                } else {
                    room.users.insert(uid.to_string(), client);
                    true
                }
            }
            "user-left" => room.leave(uid),
            "user-audio-voice-enabled" => {
                let (from, to) = if user("listening-only") == Some(&Value::Bool(true)) {
                    (&mut room.voice, &mut room.listeners)
                } else {
                    (&mut room.listeners, &mut room.voice)
                };
                let removed = from.remove(uid);
                to.insert(uid.to_string()) | removed
            }
            "user-audio-voice-disabled" => room.listeners.remove(uid) | room.voice.remove(uid),
            "user-cam-broadcast-start" | "user-cam-broadcast-end" => {
                match msg.body_field("stream").and_then(Value::as_str) {
                    Some(stream) if id == "user-cam-broadcast-start" => room
                        .streams
                        .insert(stream.to_string(), uid.to_string())
                        .is_none(),
                    Some(stream) => {
                        room.streams.remove(stream).is_some()
                            // A camera known from getMeetings only by its user.
                            || room.streams.remove(&format!("seeded:{uid}")).is_some()
                    }
                    None => false,
                }
            }
            _ => false,
        };
        if is_new {
            self.changed_rooms.insert(mid.to_string());
        } else if changed {
            self.changed_users
                .insert((mid.to_string(), uid.to_string()));
        }
    }

    fn set_recording(&mut self, record: &str, state: Recording) {
        if self.recordings.get(record) != Some(&state) {
            self.recordings.insert(record.to_string(), state);
            self.changed_recordings.insert(record.to_string());
        }
    }

    /// Drops meetings without events for `timeout_ms` (their mapping expires alike).
    pub fn expire(&mut self, now_ms: u64, timeout_ms: u64) -> usize {
        let gone: Vec<String> = self
            .rooms
            .iter()
            .filter(|(_, r)| now_ms.saturating_sub(r.last_activity_ms) > timeout_ms)
            .map(|(mid, _)| mid.clone())
            .collect();
        for mid in &gone {
            self.rooms.remove(mid);
            self.changed_rooms.insert(mid.clone());
        }
        gone.len()
    }

    /// Puts back what was stored (at start-up). A room's activity is its meeting mapping's
    /// last activity (`activity`, by internal meeting id, as stored), or `now_ms` without one.
    pub fn restore(
        &mut self,
        rooms: HashMap<String, Room>,
        recordings: HashMap<String, Recording>,
        activity: &HashMap<String, u64>,
        now_ms: u64,
    ) {
        self.rooms = rooms;
        for (mid, room) in &mut self.rooms {
            room.last_activity_ms = activity.get(mid).copied().unwrap_or(now_ms);
        }
        self.recordings = recordings;
        self.known = true;
    }

    /// Replaces the meetings with `rooms` (from `getMeetings`); every meeting before or after
    /// counts as changed. Recordings and the unique counters stay.
    pub fn seed(&mut self, mut rooms: HashMap<String, Room>, now_ms: u64) {
        self.known = true;
        for (mid, room) in &mut rooms {
            room.last_activity_ms = now_ms;
            let before = self.rooms.get(mid);
            room.counted = before.is_some_and(|r| r.counted);
            // Only what differs is written again: a reconciliation that finds the state
            // right (the usual case) writes nothing.
            if before.is_none_or(|b| !b.same_people(room)) {
                self.changed_rooms.insert(mid.clone());
            }
        }
        self.changed_rooms.extend(
            self.rooms
                .keys()
                .filter(|mid| !rooms.contains_key(*mid))
                .cloned(),
        );
        self.rooms = rooms;
    }

    /// Replaces the recordings with those BBB lists by state (`getRecordings`), keeping those
    /// it cannot list (archived, not yet processed).
    pub fn reconcile_recordings(&mut self, listed: HashMap<String, Recording>) {
        let kept: Vec<(String, Recording)> = self
            .recordings
            .iter()
            .filter(|(id, s)| **s == Recording::Unprocessed && !listed.contains_key(*id))
            .map(|(id, s)| (id.clone(), *s))
            .collect();
        let mut next = listed;
        next.extend(kept);
        for (id, state) in &self.recordings {
            if next.get(id) != Some(state) {
                self.changed_recordings.insert(id.clone());
            }
        }
        for (id, state) in &next {
            if self.recordings.get(id) != Some(state) {
                self.changed_recordings.insert(id.clone());
            }
        }
        self.recordings = next;
    }

    /// What changed since the last call, for Redis.
    pub fn take_changes(&mut self) -> Changes {
        let whole = std::mem::take(&mut self.changed_rooms);
        let users = self
            .changed_users
            .drain()
            .filter(|(mid, _)| !whole.contains(mid))
            .map(|(mid, uid)| {
                let m = self.rooms.get(&mid).and_then(|r| r.member(&uid));
                (mid, uid, m)
            })
            .collect();
        let rooms = whole
            .into_iter()
            .map(|mid| {
                let room = self.rooms.get(&mid).cloned();
                (mid, room)
            })
            .collect();
        let recordings = self
            .changed_recordings
            .drain()
            .map(|r| {
                let state = self.recordings.get(&r).copied();
                (r, state)
            })
            .collect();
        Changes {
            rooms,
            users,
            recordings,
        }
    }
}

/// bbb-exporter's client types: `html5`, `dial-in`, `flash`; anything else as sent, lowercase.
pub(crate) fn client_type(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str).map(str::to_ascii_lowercase) {
        None => "html5".into(),
        Some(c) if c.starts_with("dial-in") => "dial-in".into(),
        Some(c) => c,
    }
}

#[cfg(test)]
mod tests;

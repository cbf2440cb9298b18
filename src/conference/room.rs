//! One running meeting's people ([`Room`]), where it was created from ([`Origin`]), and one
//! user's part of it as the store keeps it ([`Member`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One running meeting (a breakout room is one too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Room {
    pub(super) breakout: bool,
    /// Where it was created from: its `bbb-origin-server-name` and `bbb-origin` metadata,
    /// lowercase (bbb-exporter's `bbb_meetings_participants_origin{server,name}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) origin: Option<Origin>,
    /// User id -> client type (`html5`, `dial-in`, ...).
    pub(super) users: BTreeMap<String, String>,
    /// Users in the voice conference listening only.
    pub(super) listeners: BTreeSet<String>,
    /// Users in the voice conference with a microphone.
    pub(super) voice: BTreeSet<String>,
    /// Camera stream id -> its user.
    pub(super) streams: BTreeMap<String, String>,
    /// Last event of the meeting (ms); not stored, reset to the restore time.
    #[serde(skip)]
    pub(super) last_activity_ms: u64,
    /// Its `meeting-created` was counted in the unique counters (a room known from
    /// `getMeetings` first is counted when its creation arrives).
    #[serde(skip)]
    pub(super) counted: bool,
}

/// A meeting's origin, from its metadata (empty when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Origin {
    pub(super) server: String,
    pub(super) name: String,
}

impl Origin {
    /// From a meeting's metadata (a JSON object, or the pairs of `getMeetings`): `None` when
    /// it names neither, as bbb-exporter counts such a meeting under empty labels.
    pub(crate) fn from_metadata<'a>(mut get: impl FnMut(&str) -> Option<&'a str>) -> Option<Self> {
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
    pub(super) client: Option<String>,
    /// `voice` or `listen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) audio: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) streams: Vec<String>,
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
    pub(super) fn same_people(&self, other: &Room) -> bool {
        self.breakout == other.breakout
            && self.origin == other.origin
            && self.users == other.users
            && self.listeners == other.listeners
            && self.voice == other.voice
            && self.streams == other.streams
    }

    /// Whether anything of the user was there.
    pub(super) fn leave(&mut self, uid: &str) -> bool {
        let was = self.users.remove(uid).is_some();
        let audio = self.listeners.remove(uid) | self.voice.remove(uid);
        let cameras = self.streams.len();
        self.streams.retain(|_, owner| owner != uid);
        was || audio || cameras != self.streams.len()
    }
}

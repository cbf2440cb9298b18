//! The conference server's state as the bus shows it, for the `bbb_*` metrics that the
//! community exporter (bbb-exporter) computes from `getMeetings`: who is in which meeting, on
//! which client, in the voice conference (speaking or listen-only), with which camera streams;
//! and the recordings' states. Set semantics: a repeated join counts once, an unknown leave
//! does nothing, a meeting's entry goes when it ends or after the mapping timeout without
//! events. Changes are buffered and written to Redis with the batch they belong to
//! ([`persist`]); [`exposition`] renders the metrics at scrape time; [`seed`] can take the
//! meetings from BBB's `getMeetings` when the bus is (re)subscribed.
//!
//! Bottom first: a meeting's people ([`Room`], in `room`) and a recording's state
//! ([`RecordingState`], in `recording`); the [`Conference`] of them here; how each event
//! changes it (`observe`); then the store, the exposition and the seed above.

mod exposition;
mod observe;
pub(crate) mod persist;
mod recording;
mod room;
pub mod seed;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use crate::event::{Mapped, Message};

pub use exposition::ConferenceExport;
pub(crate) use observe::client_type;
pub(crate) use recording::RecordingState;
pub(crate) use room::{Member, Origin, Room};

/// The whole state, and what changed since the last [`Conference::take_changes`].
#[derive(Debug, Default)]
pub struct Conference {
    rooms: HashMap<String, Room>,
    recordings: HashMap<String, RecordingState>,
    /// Non-breakout meetings and breakout rooms created since the relay started.
    unique_meetings: u64,
    unique_breakout_rooms: u64,
    /// Whether the last call of the source's BBB API (`getMeetings`) was answered; `None`
    /// without `api_url`, or before the first call.
    api_up: Option<bool>,
    /// Whether the state is known: read back from the store at start-up or seeded from
    /// `getMeetings`. Until then nothing of it is exported: an empty server for a scrape
    /// would show on every dashboard as a drop to zero.
    known: bool,
    /// Rooms to write whole (created, ended, seeded, expired).
    changed_rooms: HashSet<String>,
    /// (meeting, user) pairs whose part changed in a room not written whole.
    changed_users: HashSet<(String, String)>,
    changed_recordings: HashSet<String>,
}

/// Shared between the processing task (writes) and the metrics endpoint (reads).
pub type SharedConference = Arc<Mutex<Conference>>;

/// The servers of a pool whose edges the relay takes, each with its conference state, in the
/// order they appeared (the processing stage adds them; the exposition reads them).
pub(crate) type Joined = Arc<std::sync::RwLock<Vec<(Arc<str>, SharedConference)>>>;

impl crate::event::Observer for Mutex<Conference> {
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
    rooms: Vec<(String, Option<Room>)>,
    users: Vec<(String, String, Option<Member>)>,
    recordings: Vec<(String, Option<RecordingState>)>,
}

impl Conference {
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
        recordings: HashMap<String, RecordingState>,
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
    pub fn reconcile_recordings(&mut self, listed: HashMap<String, RecordingState>) {
        let kept: Vec<(String, RecordingState)> = self
            .recordings
            .iter()
            .filter(|(id, s)| **s == RecordingState::Unprocessed && !listed.contains_key(*id))
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

#[cfg(test)]
mod tests;

//! Applies one processed event to the [`Conference`]: a recording's step, a meeting's creation
//! and end, a user's join, leave, audio and cameras; each change marked for the store.

use serde_json::Value;

use super::{Conference, Origin, RecordingState, Room};
use crate::event::{Mapped, Message, flag};

impl Conference {
    /// Applies one processed event (`msg` is its bus message, for fields the event omits).
    pub fn observe(&mut self, msg: &Message, mapped: &Mapped, now_ms: u64) {
        let id = &*mapped.id;
        if let Some(state) = RecordingState::after(id) {
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
                self.meeting_created(mapped, mid, now_ms);
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
        self.user_event(msg, mapped, mid, uid, now_ms);
    }

    /// Meeting `mid` was created: counted once in the unique counters, with its kind and
    /// origin.
    fn meeting_created(&mut self, mapped: &Mapped, mid: &str, now_ms: u64) {
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
    }

    /// An event of user `uid` in meeting `mid`: applied to the room, and the room (when new)
    /// or the user's part of it (when changed) marked for the store.
    fn user_event(&mut self, msg: &Message, mapped: &Mapped, mid: &str, uid: &str, now_ms: u64) {
        let id = &*mapped.id;
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
        let changed = user_change(room, msg, mapped, uid);
        if is_new {
            self.changed_rooms.insert(mid.to_string());
        } else if changed {
            self.changed_users
                .insert((mid.to_string(), uid.to_string()));
        }
    }

    fn set_recording(&mut self, record: &str, state: RecordingState) {
        if self.recordings.get(record) != Some(&state) {
            self.recordings.insert(record.to_string(), state);
            self.changed_recordings.insert(record.to_string());
        }
    }
}

/// Applies user `uid`'s event to `room`: whether anything of the user changed.
fn user_change(room: &mut Room, msg: &Message, mapped: &Mapped, uid: &str) -> bool {
    let id = &*mapped.id;
    let user = |key: &str| mapped.attributes.get("user").and_then(|u| u.get(key));
    match id {
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

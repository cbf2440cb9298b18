//! Remembers the `metadata` object of each `meeting-created` event (per internal meeting id)
//! and inserts it as `data.attributes.meeting.metadata` into the later events of that meeting,
//! when that key is not there yet. The meeting is forgotten at `meeting-ended`.
//!
//! Processed payloads only: for raw hooks the plugin still learns and forgets meetings, but
//! returns `keep`. The state lives in the instance, so it is lost when the relay restarts or
//! the plugin is reloaded or rebuilt after a trap; events of meetings created before that
//! pass unchanged.
//!
//! Config: `max_meetings` (default 10000): how many open meetings are remembered; beyond
//! that the oldest one is forgotten.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

const DEFAULT_MAX_MEETINGS: usize = 10_000;

/// `meeting-ended` is called once per hook that gets it; the metadata of the last few ended
/// meetings is kept so that every one of those calls can still be completed.
const RECENTLY_ENDED: usize = 32;

struct Known {
    metadata: Value,
    /// Order of arrival, to forget the oldest meeting when the table is full.
    seq: u64,
}

struct State {
    open: HashMap<String, Known>,
    ended: VecDeque<(String, Value)>,
    next_seq: u64,
    max_meetings: usize,
}

impl State {
    fn remember(&mut self, meeting: String, metadata: Value) {
        self.ended.retain(|(id, _)| *id != meeting);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.open.insert(meeting, Known { metadata, seq });
        if self.open.len() > self.max_meetings {
            let oldest = self
                .open
                .iter()
                .min_by_key(|(_, known)| known.seq)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                self.open.remove(&oldest);
                log(
                    Level::Warn,
                    &format!(
                        "meeting-metadata: more than {} open meetings; forgot {oldest}",
                        self.max_meetings
                    ),
                );
            }
        }
    }

    /// The metadata for the `meeting-ended` of `meeting`, moving it to the recently ended list.
    fn end(&mut self, meeting: &str) -> Option<Value> {
        if let Some(known) = self.open.remove(meeting) {
            if self.ended.len() >= RECENTLY_ENDED {
                self.ended.pop_front();
            }
            self.ended
                .push_back((meeting.to_string(), known.metadata.clone()));
            return Some(known.metadata);
        }
        self.ended
            .iter()
            .find(|(id, _)| id == meeting)
            .map(|(_, metadata)| metadata.clone())
    }

    fn get(&self, meeting: &str) -> Option<Value> {
        self.open.get(meeting).map(|known| known.metadata.clone())
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        open: HashMap::new(),
        ended: VecDeque::new(),
        next_seq: 0,
        max_meetings: DEFAULT_MAX_MEETINGS,
    });
}

fn meeting_object(value: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    value
        .get_mut("data")?
        .get_mut("attributes")?
        .get_mut("meeting")?
        .as_object_mut()
}

struct MeetingMetadata;

impl Guest for MeetingMetadata {
    fn init() -> Result<Vec<String>, String> {
        let max_meetings = match get_config("max_meetings") {
            None => DEFAULT_MAX_MEETINGS,
            Some(raw) => match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(format!(
                        "meeting-metadata: `max_meetings` must be a positive integer, not {raw:?}"
                    ));
                }
            },
        };
        STATE.with_borrow_mut(|state| state.max_meetings = max_meetings);
        Ok(Vec::new())
    }

    fn on_event(event: Event, hook: Hook) -> Action {
        if event.id == "meeting-created" {
            let Ok(mut created) = serde_json::from_str::<Value>(&event.processed) else {
                log(
                    Level::Warn,
                    "meeting-metadata: meeting-created is not valid JSON",
                );
                return Action::Keep;
            };
            let Some(meeting) = meeting_object(&mut created) else {
                return Action::Keep;
            };
            let id = event.internal_meeting_id.clone().or_else(|| {
                meeting
                    .get("internal-meeting-id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            if let (Some(id), Some(metadata)) = (id, meeting.remove("metadata"))
                && metadata.is_object()
            {
                STATE.with_borrow_mut(|state| state.remember(id, metadata));
            }
            // The event carries the metadata already.
            return Action::Keep;
        }

        let Some(id) = event.internal_meeting_id.as_deref() else {
            return Action::Keep;
        };
        let metadata = STATE.with_borrow_mut(|state| {
            if event.id == "meeting-ended" {
                state.end(id)
            } else {
                state.get(id)
            }
        });
        let Some(metadata) = metadata else {
            return Action::Keep;
        };
        if hook.get_raw {
            return Action::Keep;
        }

        let Ok(mut value) = serde_json::from_str::<Value>(&event.processed) else {
            log(
                Level::Warn,
                &format!(
                    "meeting-metadata: {} is not valid JSON; left as is",
                    event.id
                ),
            );
            return Action::Keep;
        };
        let Some(meeting) = meeting_object(&mut value) else {
            return Action::Keep;
        };
        if meeting.contains_key("metadata") {
            return Action::Keep;
        }
        meeting.insert("metadata".to_string(), metadata);
        match serde_json::to_string(&value) {
            Ok(json) => Action::Replace(json),
            Err(_) => Action::Keep,
        }
    }
}

export!(MeetingMetadata);

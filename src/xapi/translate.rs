//! Turns processed events into xAPI statements, with the state that needs (a meeting's
//! registration and name, its users' names, its polls, raised hands), in bus order. No I/O:
//! what changes in the state is returned as [`Write`]s, stored with the batch.
//!
//! Where the reference is wrong, this is not (docs/xapi.md lists each difference): poll answers
//! are credited to the user who answered, a hand change makes one statement, a chat message's
//! id comes from BBB's message id, and every statement has a deterministic `id`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::statement::{Base, Ids, PLANNED_DURATION, minutes};

/// What is kept of a meeting.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Meeting {
    external_id: String,
    name: String,
    registration: String,
    create_time: u64,
    planned_minutes: i64,
    enabled: bool,
    /// `meta_xapi-create-end-actor-name`, else `<unknown>`.
    actor: String,
    /// `meta_secret-lrs-payload`, still encrypted.
    lrs_payload: Option<String>,
}

/// A poll, for its answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Poll {
    question: String,
    choices: Vec<Value>,
}

/// A meeting's whole state.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct State {
    pub(super) meeting: Meeting,
    pub(super) users: HashMap<String, String>,
    pub(super) polls: HashMap<String, Poll>,
    pub(super) hands: HashMap<String, bool>,
}

/// A change to store (by internal meeting id).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Write {
    Meeting(String, Meeting),
    User(String, String, String),
    Poll(String, String, Poll),
    Hand(String, String, bool),
    /// The meeting ended: its state goes.
    Forget(String),
}

/// Why an event made no statement (a metric label), when it is one the output handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    Disabled,
    UnknownMeeting,
    UnknownUser,
    UnknownPoll,
    /// Listen-only, muted, or a hand already in that state.
    NoChange,
}

impl Skip {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::UnknownMeeting => "unknown_meeting",
            Self::UnknownUser => "unknown_user",
            Self::UnknownPoll => "unknown_poll",
            Self::NoChange => "no_change",
        }
    }
}

/// A statement for a meeting's LRS.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Statement {
    pub(super) internal_meeting_id: String,
    pub(super) lrs_payload: Option<String>,
    pub(super) json: Value,
}

/// Whether the output makes statements of event `id` (`meeting-created` and every id of
/// [`statements::TABLE`]).
pub(crate) fn handles(id: &str) -> bool {
    id == "meeting-created" || statements::TABLE.iter().any(|(e, _)| *e == id)
}

const INITIALIZED: &str = "http://adlnet.gov/expapi/verbs/initialized";

/// An event as the translator reads it.
pub(crate) struct Input<'a> {
    /// The processed event (`{"data": {...}}`).
    pub(super) processed: &'a Value,
    /// The bus message it came from; `None` for the events the relay makes itself.
    pub(super) raw: Option<&'a Value>,
    pub(super) raw_text: Option<&'a str>,
}

/// The text at `path` of `v`.
fn s<'v>(v: &'v Value, path: &str) -> Option<&'v str> {
    v.pointer(path).and_then(Value::as_str)
}

/// Makes the statement of one event, given its meeting's state (`None`: not known), and says
/// how the state changes.
///
/// # Errors
/// Why no statement is made, for an event the output handles.
pub(crate) fn translate(
    ids: &Ids,
    input: &Input<'_>,
    state: Option<&State>,
    writes: &mut Vec<Write>,
) -> Result<Option<Statement>, Skip> {
    let p = input.processed;
    let Some(id) = s(p, "/data/id") else {
        return Ok(None);
    };
    if !handles(id) {
        return Ok(None);
    }
    let attrs = p.pointer("/data/attributes").unwrap_or(&Value::Null);
    let Some(mid) = s(attrs, "/meeting/internal-meeting-id") else {
        return Err(Skip::UnknownMeeting);
    };
    let when = timestamp(input);
    if id == "meeting-created" {
        let meeting = created(ids, attrs);
        writes.push(Write::Meeting(mid.into(), meeting.clone()));
        if !meeting.enabled {
            return Err(Skip::Disabled);
        }
        let base = base(ids, mid, &meeting);
        let mut st = base.statement(&meeting.actor, INITIALIZED, meeting.create_time);
        st["context"]["extensions"][PLANNED_DURATION] = json!(minutes(meeting.planned_minutes));
        return Ok(Some(finish(ids, input, id, mid, &meeting, st)));
    }
    let Some(state) = state else {
        return Err(Skip::UnknownMeeting);
    };
    let meeting = &state.meeting;
    if !meeting.enabled {
        if id == "meeting-ended" {
            writes.push(Write::Forget(mid.into()));
        }
        return Err(Skip::Disabled);
    }
    let Some((_, make)) = statements::TABLE.iter().find(|(e, _)| *e == id) else {
        return Ok(None);
    };
    let mut event = statements::Event {
        ids,
        input,
        attrs,
        mid,
        when,
        state,
        base: base(ids, mid, meeting),
        uid: s(attrs, "/user/internal-user-id"),
        writes,
    };
    let st = make(&mut event)?;
    Ok(Some(finish(ids, input, id, mid, meeting, st)))
}

fn base<'a>(ids: &'a Ids, mid: &'a str, m: &'a Meeting) -> Base<'a> {
    Base {
        ids,
        internal_meeting_id: mid,
        external_meeting_id: &m.external_id,
        meeting_name: &m.name,
        registration: &m.registration,
    }
}

/// The meeting's facts from its `meeting-created`.
fn created(ids: &Ids, attrs: &Value) -> Meeting {
    let m = attrs.get("meeting").unwrap_or(&Value::Null);
    let meta = m.get("metadata").and_then(Value::as_object);
    let meta_text = |k: &str| {
        meta.and_then(|o: &Map<String, Value>| o.get(k))
            .and_then(Value::as_str)
    };
    let external_id = s(m, "/external-meeting-id").unwrap_or_default().to_string();
    let create_time = m.get("create-time").and_then(Value::as_u64).unwrap_or(0);
    Meeting {
        registration: ids.uuid(&format!(
            "{external_id}_{}",
            super::statement::day(create_time)
        )),
        name: s(m, "/name").unwrap_or_default().into(),
        create_time,
        planned_minutes: m.get("duration").and_then(Value::as_i64).unwrap_or(0),
        enabled: meta_text("xapi-enabled") != Some("false"),
        actor: meta_text("xapi-create-end-actor-name")
            .filter(|a| !a.is_empty())
            .unwrap_or("<unknown>")
            .into(),
        lrs_payload: meta_text("secret-lrs-payload").map(str::to_string),
        external_id,
    }
}

/// When it happened: the bus message's envelope time (the same on every instance and on a
/// replay), else the processed event's.
fn timestamp(input: &Input<'_>) -> u64 {
    input
        .raw
        .and_then(|r| r.pointer("/envelope/timestamp"))
        .and_then(Value::as_u64)
        .or_else(|| {
            input
                .processed
                .pointer("/data/event/ts")
                .and_then(Value::as_u64)
        })
        .unwrap_or(0)
}

/// Adds the statement's id: UUID v5 of the event id and the bus message (or, for an event the
/// relay made, the processed event without its time), so a statement made again is the same.
fn finish(
    ids: &Ids,
    input: &Input<'_>,
    id: &str,
    mid: &str,
    m: &Meeting,
    mut st: Value,
) -> Statement {
    let mut h = Sha256::new();
    match input.raw_text {
        Some(raw) => h.update(raw.as_bytes()),
        None => {
            let mut p = input.processed.clone();
            if let Some(d) = p.get_mut("data").and_then(Value::as_object_mut) {
                d.remove("event");
            }
            h.update(p.to_string().as_bytes());
        }
    }
    let key = format!("statement/{mid}/{id}/{}", hex::encode(&h.finalize()[..16]));
    if let Some(o) = st.as_object_mut() {
        let mut with_id = Map::new();
        with_id.insert("id".into(), json!(ids.uuid(&key)));
        with_id.extend(std::mem::take(o));
        *o = with_id;
    }
    Statement {
        internal_meeting_id: mid.into(),
        lrs_payload: m.lrs_payload.clone(),
        json: st,
    }
}

impl State {
    /// Applies the changes made for this meeting.
    pub(crate) fn apply(&mut self, w: &Write) {
        match w {
            Write::Meeting(_, m) => {
                *self = Self {
                    meeting: m.clone(),
                    ..Self::default()
                }
            }
            Write::User(_, u, n) => {
                self.users.insert(u.clone(), n.clone());
            }
            Write::Poll(_, p, poll) => {
                self.polls.insert(p.clone(), poll.clone());
            }
            Write::Hand(_, u, up) => {
                self.hands.insert(u.clone(), *up);
            }
            Write::Forget(_) => {}
        }
    }
}

mod statements;
#[cfg(test)]
mod tests;

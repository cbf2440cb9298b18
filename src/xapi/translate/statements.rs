//! One function per event id the output makes statements of, in one table: an id without an
//! entry makes no statement (never another event's), and [`super::handles`] is read from the
//! same table. `meeting-created`, which starts a meeting's state, is the translator's own.

use serde_json::{Value, json};

use super::{Input, Poll, Skip, State, Write, s};
use crate::xapi::statement::{Base, EMOJI, Ids, PLANNED_DURATION, minutes, seconds};

const TERMINATED: &str = "http://adlnet.gov/expapi/verbs/terminated";
const START: &str = "http://activitystrea.ms/start";
const STOPPED: &str = "https://w3id.org/xapi/virtual-classroom/verbs/stopped";
const SHARE: &str = "http://activitystrea.ms/share";
const UNSHARE: &str = "http://activitystrea.ms/unshare";

/// What one event's statement is made from.
pub(super) struct Event<'a> {
    pub(super) ids: &'a Ids,
    pub(super) input: &'a Input<'a>,
    pub(super) attrs: &'a Value,
    /// Its internal meeting id.
    pub(super) mid: &'a str,
    /// When it happened (ms).
    pub(super) when: u64,
    pub(super) state: &'a State,
    pub(super) base: Base<'a>,
    /// Its user's internal id, when it has one.
    pub(super) uid: Option<&'a str>,
    pub(super) writes: &'a mut Vec<Write>,
}

impl Event<'_> {
    /// The name the meeting knows user `uid` by.
    fn name_of(&self, uid: Option<&str>) -> Option<String> {
        uid.and_then(|u| self.state.users.get(u)).cloned()
    }
}

/// Makes an event's statement (its id added later), or says why none is made.
pub(super) type Make = fn(&mut Event<'_>) -> Result<Value, Skip>;

/// Every event id (but `meeting-created`) the output makes statements of, and how.
pub(super) const TABLE: [(&str, Make); 15] = [
    ("meeting-ended", meeting_ended),
    ("user-joined", user_joined),
    ("user-left", user_left),
    ("user-audio-voice-enabled", voice_enabled),
    ("user-audio-voice-disabled", micro_stopped),
    ("user-audio-muted", micro_stopped),
    ("user-audio-unmuted", micro_started),
    ("user-cam-broadcast-start", camera_started),
    ("user-cam-broadcast-end", camera_stopped),
    ("meeting-screenshare-started", screen_shared),
    ("meeting-screenshare-stopped", screen_unshared),
    ("chat-group-message-sent", chat_message),
    ("poll-started", poll_started),
    ("poll-responded", poll_responded),
    ("user-raise-hand-changed", hand_changed),
];

fn meeting_ended(e: &mut Event<'_>) -> Result<Value, Skip> {
    e.writes.push(Write::Forget(e.mid.into()));
    let meeting = &e.state.meeting;
    let mut st = e.base.statement(&meeting.actor, TERMINATED, e.when);
    st["context"]["extensions"][PLANNED_DURATION] = json!(minutes(meeting.planned_minutes));
    st["result"] = json!({"duration": seconds(e.when.saturating_sub(meeting.create_time))});
    Ok(st)
}

fn user_joined(e: &mut Event<'_>) -> Result<Value, Skip> {
    let (Some(uid), Some(name)) = (e.uid, s(e.attrs, "/user/name")) else {
        return Err(Skip::UnknownUser);
    };
    e.writes
        .push(Write::User(e.mid.into(), uid.into(), name.into()));
    Ok(e.base
        .statement(name, "http://activitystrea.ms/join", e.when))
}

fn user_left(e: &mut Event<'_>) -> Result<Value, Skip> {
    let name = e.name_of(e.uid).ok_or(Skip::UnknownUser)?;
    Ok(e.base
        .statement(&name, "http://activitystrea.ms/leave", e.when))
}

fn hand_changed(e: &mut Event<'_>) -> Result<Value, Skip> {
    let (Some(uid), Some(name)) = (e.uid, e.name_of(e.uid)) else {
        return Err(Skip::UnknownUser);
    };
    // The relay's own event for an older server's emoji says `raiseHand`.
    let up = e
        .attrs
        .pointer("/user/raise-hand")
        .or_else(|| e.attrs.pointer("/user/raiseHand"))
        .is_some_and(truthy);
    if e.state.hands.get(uid).copied().unwrap_or(false) == up {
        return Err(Skip::NoChange);
    }
    e.writes.push(Write::Hand(e.mid.into(), uid.into(), up));
    let verb = if up { "reacted" } else { "unreacted" };
    let mut st = e.base.statement(
        &name,
        &format!("https://w3id.org/xapi/virtual-classroom/verbs/{verb}"),
        e.when,
    );
    st["result"] = json!({"extensions": {EMOJI: "U+1F590"}});
    Ok(st)
}

fn chat_message(e: &mut Event<'_>) -> Result<Value, Skip> {
    let sender = e
        .attrs
        .pointer("/chat-message/sender")
        .unwrap_or(&Value::Null);
    let name = s(sender, "/name").unwrap_or("<unknown>");
    let key = s(e.attrs, "/chat-message/id").map_or_else(
        || {
            format!(
                "{}_{}",
                s(sender, "/internal-user-id").unwrap_or_default(),
                sender.get("time").map(Value::to_string).unwrap_or_default()
            )
        },
        str::to_string,
    );
    let at = sender.get("time").and_then(Value::as_u64).unwrap_or(e.when);
    let mut st = e
        .base
        .statement(name, "https://w3id.org/xapi/acrossx/verbs/posted", at);
    st["object"] = json!({
        "id": e.ids.activity(&key),
        "definition": {"type": "https://w3id.org/xapi/acrossx/activities/message"},
    });
    Ok(e.base.with_parent(st))
}

fn poll_started(e: &mut Event<'_>) -> Result<Value, Skip> {
    let Some(poll_id) = s(e.attrs, "/poll/id") else {
        return Err(Skip::UnknownPoll);
    };
    let choices = e
        .attrs
        .pointer("/poll/answers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    let id = c.get("id").map_or_else(String::new, |v| match v {
                        Value::String(t) => t.clone(),
                        other => other.to_string(),
                    });
                    json!({"id": id, "description": {"en": s(c, "/key").unwrap_or_default()}})
                })
                .collect()
        })
        .unwrap_or_default();
    let poll = Poll {
        question: s(e.attrs, "/poll/question").unwrap_or_default().into(),
        choices,
    };
    e.writes
        .push(Write::Poll(e.mid.into(), poll_id.into(), poll.clone()));
    let name = e.name_of(e.uid).unwrap_or_else(|| "<unknown>".into());
    let mut st = e
        .base
        .statement(&name, "http://adlnet.gov/expapi/verbs/asked", e.when);
    st["object"] = poll_object(e.ids, poll_id, &poll);
    Ok(e.base.with_parent(st))
}

fn poll_responded(e: &mut Event<'_>) -> Result<Value, Skip> {
    let poll_id = s(e.attrs, "/poll/id").ok_or(Skip::UnknownPoll)?;
    let poll = e.state.polls.get(poll_id).ok_or(Skip::UnknownPoll)?;
    // The bus message's body names who answered; the processed event (like the reference's)
    // names the presenter it was sent to.
    let who = e
        .input
        .raw
        .and_then(|r| s(r, "/core/body/userId"))
        .or(e.uid);
    let name = e.name_of(who).unwrap_or_else(|| "<unknown>".into());
    let answers: Vec<String> = e
        .attrs
        .pointer("/poll/answerIds")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.to_string()).collect())
        .unwrap_or_default();
    let mut st = e
        .base
        .statement(&name, "http://adlnet.gov/expapi/verbs/answered", e.when);
    st["object"] = poll_object(e.ids, poll_id, poll);
    st["result"] = json!({"response": answers.join("[,]")});
    Ok(e.base.with_parent(st))
}

fn voice_enabled(e: &mut Event<'_>) -> Result<Value, Skip> {
    let u = e.attrs.get("user").unwrap_or(&Value::Null);
    if u.get("listening-only").is_some_and(truthy)
        || u.get("muted").is_some_and(truthy)
        || u.get("sharing-mic") == Some(&Value::Bool(false))
    {
        return Err(Skip::NoChange);
    }
    media(e, "micro", START)
}

fn micro_started(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "micro", START)
}

fn micro_stopped(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "micro", STOPPED)
}

fn camera_started(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "camera", START)
}

fn camera_stopped(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "camera", STOPPED)
}

fn screen_shared(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "screen", SHARE)
}

fn screen_unshared(e: &mut Event<'_>) -> Result<Value, Skip> {
    media(e, "screen", UNSHARE)
}

/// A user's microphone, camera or screen started or stopped.
fn media(e: &Event<'_>, media: &str, verb: &str) -> Result<Value, Skip> {
    let (Some(uid), Some(name)) = (e.uid, e.name_of(e.uid)) else {
        return Err(Skip::UnknownUser);
    };
    let mut st = e.base.statement(&name, verb, e.when);
    st["object"] = json!({
        "id": e.ids.activity(&format!("{uid}_{media}")),
        "definition": {
            "type": format!("https://w3id.org/xapi/virtual-classroom/activity-types/{media}"),
            "name": {"en": format!("{name}'s {media}")},
        },
    });
    Ok(e.base.with_parent(st))
}

fn truthy(v: &Value) -> bool {
    matches!(v, Value::Bool(true)) || v.as_str() == Some("true")
}

fn poll_object(ids: &Ids, poll_id: &str, poll: &Poll) -> Value {
    json!({
        "id": ids.activity(poll_id),
        "definition": {
            "description": {"en": poll.question},
            "type": "http://adlnet.gov/expapi/activities/cmi.interaction",
            "interactionType": "choice",
            "choices": poll.choices,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::TABLE;

    /// Each id once: a second entry would never be reached.
    #[test]
    fn every_event_id_is_in_the_table_once() {
        let mut ids: Vec<&str> = TABLE.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert!(!ids.contains(&"meeting-created"));
    }
}

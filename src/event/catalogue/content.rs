//! Chat, poll, shared-notes and transcript events.

use serde_json::{Map, Value};

use super::{MapError, Mapped, put, user::user_ids, with_meeting};
use crate::event::{
    decode::{Message, path, truthy_str},
    mapping::Mappings,
};

/// The only chat delivered: the meeting's public chat.
const PUBLIC_CHAT: &str = "MAIN-PUBLIC-GROUP-CHAT";

pub(super) fn chat_message(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    if msg.body_field("chatId").and_then(Value::as_str) != Some(PUBLIC_CHAT) {
        return Ok(None);
    }
    let chat = msg.body_field("msg").and_then(Value::as_object);
    let field = |k: &str| chat.and_then(|c| c.get(k));
    let mut sender = Map::new();
    let uid = msg.user_id();
    if let Some(uid) = uid {
        sender.insert("internal-user-id".into(), uid.into());
    }
    // EUID-b: the mapping only, omitted when unknown.
    if let Some(e) = msg
        .meeting_id()
        .zip(uid)
        .and_then(|(mid, uid)| m.user(mid, uid))
    {
        sender.insert("external-user-id".into(), e.external.as_str().into());
    }
    put(
        &mut sender,
        "name",
        field("sender").and_then(|s| s.get("name")),
    );
    put(&mut sender, "time", field("timestamp"));
    let mut message = Map::new();
    put(&mut message, "id", field("id"));
    put(&mut message, "message", field("message"));
    message.insert("sender".into(), Value::Object(sender));
    let mut attributes = with_meeting(msg, m);
    attributes.insert("chat-message".into(), Value::Object(message));
    put(&mut attributes, "chat-id", msg.body_field("chatId"));
    Ok(Some(Mapped::new("chat-group-message-sent", attributes)))
}

/// Poll id: `pollId`, else `poll.id`.
fn poll_id(msg: &Message) -> Option<&Value> {
    msg.body_field("pollId")
        .filter(|v| truthy_str(Some(v)).is_some())
        .or_else(|| path(&msg.value, &["core", "body", "poll", "id"]))
}

fn poll_event(
    id: &'static str,
    msg: &Message,
    m: &Mappings,
    uid: Option<&str>,
    poll: Map<String, Value>,
) -> Mapped {
    let mut attributes = with_meeting(msg, m);
    attributes.insert("user".into(), Value::Object(user_ids(msg, m, uid)));
    attributes.insert("poll".into(), Value::Object(poll));
    Mapped::new(id, attributes)
}

pub(super) fn poll_started(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let poll = msg
        .body_field("poll")
        .and_then(Value::as_object)
        .ok_or(MapError::Missing {
            message: "PollStartedEvtMsg",
            field: "core.body.poll",
        })?;
    let mut p = Map::new();
    put(&mut p, "id", poll_id(msg));
    put(&mut p, "question", msg.body_field("question"));
    put(&mut p, "answers", poll.get("answers"));
    Ok(Some(poll_event("poll-started", msg, m, msg.user_id(), p)))
}

/// The respondent is `core.body.userId`; the header names the poll's owner (the reference
/// reports the owner: bbb-events.md section 9, item 14).
pub(super) fn poll_responded(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let respondent = truthy_str(msg.body_field("userId"))
        .filter(|u| *u != "not-used")
        .or_else(|| msg.user_id());
    let mut p = Map::new();
    put(&mut p, "id", poll_id(msg));
    put(&mut p, "answerIds", msg.body_field("answerIds"));
    Ok(Some(poll_event("poll-responded", msg, m, respondent, p)))
}

pub(super) fn pad_content(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let mut pad = Map::new();
    for (key, field) in [
        ("id", "padId"),
        ("external-pad-id", "externalId"),
        ("rev", "rev"),
        ("start", "start"),
        ("end", "end"),
        ("text", "text"),
    ] {
        put(&mut pad, key, msg.body_field(field));
    }
    let mut attributes = with_meeting(msg, m);
    attributes.insert("pad".into(), Value::Object(pad));
    Ok(Some(Mapped::new("pad-content", attributes)))
}

pub(super) fn transcript_updated(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let mut t = Map::new();
    for (key, field) in [
        ("id", "transcriptId"),
        ("transcript", "transcript"),
        ("locale", "locale"),
        ("final", "result"),
    ] {
        put(&mut t, key, msg.body_field(field));
    }
    let mut attributes = with_meeting(msg, m);
    attributes.insert(
        "user".into(),
        Value::Object(user_ids(msg, m, msg.user_id())),
    );
    attributes.insert("transcript".into(), Value::Object(t));
    Ok(Some(Mapped::new("transcript-updated", attributes)))
}

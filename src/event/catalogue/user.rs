//! User events: joined, left, audio, camera, presenter, emoji and raise-hand (the user template of
//! bbb-events.md 2.4.3 plus per-event keys); beyond the reference's catalogue, role and away
//! changes.

use serde_json::{Map, Value};

use super::{MapError, Mapped, put, with_meeting};
use crate::event::{
    decode::{Message, flag, path, truthy, truthy_str},
    mapping::Mappings,
};

/// EUID-a: the stored mapping's external id, else the body's `extId`, else `""`.
pub(super) fn external_user_id<'a>(
    msg: &'a Message,
    mappings: &'a Mappings,
    uid: Option<&str>,
) -> &'a str {
    let stored = msg
        .meeting_id()
        .zip(uid)
        .and_then(|(mid, uid)| mappings.user(mid, uid))
        .map(|e| e.external.as_str())
        .filter(|s| !s.is_empty());
    stored
        .or_else(|| truthy_str(msg.body_field("extId")))
        .unwrap_or("")
}

/// `{"internal-user-id": UID, "external-user-id": EUID-a}`.
pub(super) fn user_ids(
    msg: &Message,
    mappings: &Mappings,
    uid: Option<&str>,
) -> Map<String, Value> {
    let mut u = Map::new();
    if let Some(uid) = uid {
        u.insert("internal-user-id".into(), uid.into());
    }
    u.insert(
        "external-user-id".into(),
        external_user_id(msg, mappings, uid).into(),
    );
    u
}

/// The user template: ids, then whatever of the body's user fields the message carries.
fn template(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut u = user_ids(msg, mappings, msg.user_id());
    for (key, field) in [
        ("name", "name"),
        ("role", "role"),
        ("presenter", "presenter"),
        ("ip-address", "ipAddress"),
        ("user-agent", "userAgent"),
        ("referer", "referer"),
        ("session-token", "sessionToken"),
    ] {
        put(&mut u, key, msg.body_field(field));
    }
    if let Some(data) = ["userdata", "userMetadata", "userCustomData"]
        .iter()
        .map(|f| msg.body_field(f))
        .find(|v| truthy(*v))
    {
        put(&mut u, "userdata", data);
    }
    put(&mut u, "stream", msg.body_field("stream"));
    u
}

/// Builds a user event: meeting block, then the template extended by `extra`.
fn event(
    id: &'static str,
    msg: &Message,
    mappings: &Mappings,
    extra: impl FnOnce(&mut Map<String, Value>),
) -> Result<Option<Mapped>, MapError> {
    let mut attributes = with_meeting(msg, mappings);
    let mut user = template(msg, mappings);
    extra(&mut user);
    attributes.insert("user".into(), Value::Object(user));
    Ok(Some(Mapped::new(id, attributes)))
}

/// `guest`: the body's flag, else the stored user's; `"true"` counts as true.
fn guest(msg: &Message, mappings: &Mappings) -> bool {
    match msg.body_field("guest").filter(|v| !v.is_null()) {
        Some(v) => flag(v),
        None => msg
            .meeting_id()
            .zip(msg.user_id())
            .and_then(|(mid, uid)| mappings.user(mid, uid))
            .is_some_and(|e| e.user.guest()),
    }
}

pub(super) fn joined(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let g = guest(msg, m);
    event("user-joined", msg, m, |u| {
        u.insert("guest".into(), g.into());
    })
}

pub(super) fn left(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let g = guest(msg, m);
    event("user-left", msg, m, |u| {
        u.insert("guest".into(), g.into());
    })
}

pub(super) fn voice_enabled(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let listen_only = msg.body_field("listenOnly");
    event("user-audio-voice-enabled", msg, m, |u| {
        put(u, "listening-only", listen_only);
        u.insert("sharing-mic".into(), (!truthy(listen_only)).into());
        put(u, "muted", msg.body_field("muted"));
    })
}

pub(super) fn voice_disabled(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-audio-voice-disabled", msg, m, |u| {
        u.insert("listening-only".into(), false.into());
        u.insert("sharing-mic".into(), false.into());
        u.insert("muted".into(), true.into());
    })
}

pub(super) fn muted(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let muted = msg.body_field("muted");
    let id = match muted {
        Some(Value::Bool(true)) => "user-audio-muted",
        Some(Value::Bool(false)) => "user-audio-unmuted",
        _ => return event("user-audio-unhandled", msg, m, |_| {}),
    };
    event(id, msg, m, |u| put(u, "muted", muted))
}

pub(super) fn cam_started(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-cam-broadcast-start", msg, m, |_| {})
}

pub(super) fn cam_stopped(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-cam-broadcast-end", msg, m, |_| {})
}

pub(super) fn presenter_assigned(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-presenter-assigned", msg, m, |_| {})
}

pub(super) fn presenter_unassigned(
    msg: &Message,
    m: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    event("user-presenter-unassigned", msg, m, |_| {})
}

pub(super) fn emoji_changed(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let emoji = [msg.body_field("emoji"), msg.body_field("reactionEmoji")]
        .into_iter()
        .find(|v| truthy(*v))
        .flatten()
        .cloned()
        .unwrap_or_else(|| "none".into());
    event("user-emoji-changed", msg, m, |u| {
        u.insert("emoji".into(), emoji);
    })
}

pub(super) fn raise_hand_changed(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-raise-hand-changed", msg, m, |u| {
        put(u, "raise-hand", msg.body_field("raiseHand"));
    })
}

/// `UserRoleChangedEvtMsg`: the user is the body's (its header names who changed the role),
/// with the new role; `changed-by` the one who changed it.
pub(super) fn role_changed(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let uid = msg.body_field("userId").and_then(Value::as_str);
    let mut user = user_ids(msg, m, uid);
    put(&mut user, "role", msg.body_field("role"));
    let mut attributes = with_meeting(msg, m);
    attributes.insert("user".into(), Value::Object(user));
    // The header's user changed it (never the body's: that is whose role changed).
    let by = truthy_str(msg.body_field("changedBy"))
        .or_else(|| truthy_str(path(&msg.value, &["core", "header", "userId"])));
    if let Some(by) = by {
        attributes.insert(
            "changed-by".into(),
            Value::Object(user_ids(msg, m, Some(by))),
        );
    }
    Ok(Some(Mapped::new("user-role-changed", attributes)))
}

/// `UserAwayChangedEvtMsg`: a user set or cleared their away status.
pub(super) fn away_changed(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    event("user-away-changed", msg, m, |u| {
        put(u, "away", msg.body_field("away"));
    })
}

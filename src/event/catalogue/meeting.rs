//! Meeting events: created, ended, recording status, screen share, presentation; and beyond the
//! reference's catalogue, why a meeting ends and its breakout rooms.

use serde_json::{Map, Value};

use super::{MapError, Mapped, put, user::user_ids, with_meeting};
use crate::event::{
    decode::{Message, path},
    mapping::Mappings,
};

pub(super) fn created(msg: &Message, _: &Mappings) -> Result<Option<Mapped>, MapError> {
    const NAME: &str = "MeetingCreatedEvtMsg";
    let props = path(&msg.value, &["core", "body", "props"]).and_then(Value::as_object);
    let part = |field: &'static str| {
        props
            .and_then(|p| p.get(field))
            .and_then(Value::as_object)
            .ok_or(MapError::Missing {
                message: NAME,
                field,
            })
    };
    let meeting_prop = part("meetingProp")?;
    let breakout = part("breakoutProps")?;
    let duration = part("durationProps")?;
    let password = part("password")?;
    let record = part("recordProp")?;
    let voice = part("voiceProp")?;
    let users = part("usersProp")?;
    let metadata = part("metadataProp")?;
    let rows: [(&str, &Map<String, Value>, &str); 18] = [
        ("internal-meeting-id", meeting_prop, "intId"),
        ("external-meeting-id", meeting_prop, "extId"),
        ("name", meeting_prop, "name"),
        ("is-breakout", meeting_prop, "isBreakout"),
        ("parent-id", breakout, "parentId"),
        ("duration", duration, "duration"),
        ("create-time", duration, "createdTime"),
        ("create-date", duration, "createdDate"),
        ("moderator-pass", password, "moderatorPass"),
        ("viewer-pass", password, "viewerPass"),
        ("record", record, "record"),
        ("voice-conf", voice, "voiceConf"),
        ("dial-number", voice, "dialNumber"),
        ("max-users", users, "maxUsers"),
        ("metadata", metadata, "metadata"),
        ("audioBridge", meeting_prop, "audioBridge"),
        ("cameraBridge", meeting_prop, "cameraBridge"),
        ("screenShareBridge", meeting_prop, "screenShareBridge"),
    ];
    let mut m = Map::new();
    for (key, source, field) in rows {
        put(&mut m, key, source.get(field));
    }
    let mut attributes = Map::new();
    attributes.insert("meeting".into(), Value::Object(m));
    Ok(Some(Mapped::new("meeting-created", attributes)))
}

pub(super) fn ended(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    Ok(Some(Mapped::new(
        "meeting-ended",
        with_meeting(msg, mappings),
    )))
}

pub(super) fn recording_status(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    let id = match msg.body_field("recording") {
        Some(Value::Bool(true)) => "meeting-recording-started",
        Some(Value::Bool(false)) => "meeting-recording-stopped",
        _ => "meeting-recording-unhandled",
    };
    Ok(Some(Mapped::new(id, with_meeting(msg, mappings))))
}

pub(super) fn screenshare_started(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    screenshare("meeting-screenshare-started", msg, mappings, |u| {
        u.presenter()
    })
}

pub(super) fn screenshare_stopped(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    screenshare("meeting-screenshare-stopped", msg, mappings, |u| {
        u.screenshare
    })
}

/// The sharing user is the header's user (BBB >= 3.0.11); older servers send `not-used`, so the
/// first user of the meeting that the tracking marks (presenter for start, sharer for stop) is
/// taken. Nobody found: the event is dropped, as the reference does.
fn screenshare(
    id: &'static str,
    msg: &Message,
    mappings: &Mappings,
    marked: fn(&crate::event::mapping::UserEntry) -> bool,
) -> Result<Option<Mapped>, MapError> {
    let mid = msg.meeting_id();
    let uid = msg
        .user_id()
        .or_else(|| mid.and_then(|mid| mappings.first_user_where(mid, marked)))
        .ok_or(MapError::NoScreenshareUser(id))?;
    let mut user = Map::new();
    user.insert("internal-user-id".into(), uid.into());
    if let Some(entry) = mid.and_then(|mid| mappings.user(mid, uid)) {
        user.insert("external-user-id".into(), entry.external.as_str().into());
    }
    let mut attributes = with_meeting(msg, mappings);
    attributes.insert("user".into(), Value::Object(user));
    Ok(Some(Mapped::new(id, attributes)))
}

pub(super) fn presentation_changed(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    let mut attributes = with_meeting(msg, mappings);
    if let Some(Value::Object(m)) = attributes.get_mut("meeting") {
        put(m, "presentation-id", msg.body_field("presentationId"));
    }
    Ok(Some(Mapped::new(
        "meeting-presentation-changed",
        attributes,
    )))
}

/// `MeetingEndingEvtMsg`: the meeting is about to end, and why (`reason`: akka-apps'
/// `MeetingEndReason`, e.g. `ENDED_FROM_API`, `ENDED_WHEN_LAST_USER_LEFT`). `ended-by`: the
/// user who ended it, when a user did (the header's user; `system` and `not-used` are none).
pub(super) fn ending(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    let mut attributes = with_meeting(msg, mappings);
    put(&mut attributes, "reason", msg.body_field("reason"));
    if let Some(uid) = msg.user_id().filter(|u| *u != "system") {
        attributes.insert(
            "ended-by".into(),
            Value::Object(user_ids(msg, mappings, Some(uid))),
        );
    }
    Ok(Some(Mapped::new("meeting-ending", attributes)))
}

/// `BreakoutRoomStartedEvtMsg` (on the parent meeting): `meeting` is the parent, `breakout`
/// the room. The room's join URLs (`html5JoinUrls`) are left out: each lets its user in.
pub(super) fn breakout_started(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    let room = path(&msg.value, &["core", "body", "breakout"]).and_then(Value::as_object);
    let field = |k: &str| room.and_then(|r| r.get(k));
    let mut b = Map::new();
    put(&mut b, "internal-meeting-id", field("breakoutId"));
    put(&mut b, "external-meeting-id", field("externalId"));
    for (key, source) in [
        ("name", "name"),
        ("short-name", "shortName"),
        ("sequence", "sequence"),
        ("is-default-name", "isDefaultName"),
        ("free-join", "freeJoin"),
        ("capture-notes", "captureNotes"),
        ("capture-slides", "captureSlides"),
    ] {
        put(&mut b, key, field(source));
    }
    let mut attributes = with_meeting(msg, mappings);
    attributes.insert("breakout".into(), Value::Object(b));
    Ok(Some(Mapped::new("breakout-room-started", attributes)))
}

/// `BreakoutRoomEndedEvtMsg` (on the parent meeting): the room's external id is the one its
/// own `meeting-created` gave, omitted when the relay did not see it.
pub(super) fn breakout_ended(
    msg: &Message,
    mappings: &Mappings,
) -> Result<Option<Mapped>, MapError> {
    let mut b = Map::new();
    if let Some(room) = msg.body_field("breakoutId").and_then(Value::as_str) {
        b.insert("internal-meeting-id".into(), room.into());
        if let Some(ext) = mappings.external_meeting(room) {
            b.insert("external-meeting-id".into(), ext.into());
        }
    }
    let mut attributes = with_meeting(msg, mappings);
    attributes.insert("breakout".into(), Value::Object(b));
    Ok(Some(Mapped::new("breakout-room-ended", attributes)))
}

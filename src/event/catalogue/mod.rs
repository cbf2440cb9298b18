//! Maps a decoded bus message to a processed webhook event (bbb-events.md section 2, v3
//! catalogue). One function per message; adding an event is one function and one row of
//! [`TABLE`]. Pure: reads the id mappings, never changes them ([`super::process`] does that).

mod content;
mod meeting;
mod needs;
mod recording;
mod timer;
mod user;

use std::{borrow::Cow, collections::HashMap, sync::LazyLock};

use serde_json::{Map, Value, json};

use self::needs::{
    BREAKOUT_ENDED, BREAKOUT_STARTED, CHAT, CORE, Needs, POLL_RESPONDED, POLL_STARTED,
    ROLE_CHANGED, USER,
};
use super::{
    decode::{Message, path},
    mapping::Mappings,
};

/// Why a message that names a known event could not be mapped (it is dropped and counted).
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{message}: no {field}")]
    Missing {
        message: &'static str,
        field: &'static str,
    },
    #[error("{message}: {field} is not {expected}")]
    WrongType {
        message: &'static str,
        field: &'static str,
        expected: &'static str,
    },
    #[error("{0}: no user to attribute the screen share to")]
    NoScreenshareUser(&'static str),
}

impl MapError {
    pub(crate) fn missing(message: &'static str, field: &'static str) -> Self {
        Self::Missing { message, field }
    }

    pub(crate) fn wrong_type(
        message: &'static str,
        field: &'static str,
        expected: &'static str,
    ) -> Self {
        Self::WrongType {
            message,
            field,
            expected,
        }
    }

    /// A bounded metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing { .. } => "missing_field",
            Self::WrongType { .. } => "wrong_type",
            Self::NoScreenshareUser(_) => "no_screenshare_user",
        }
    }
}

/// A processed event before its timestamp is settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub(crate) id: Cow<'static, str>,
    pub(crate) attributes: Map<String, Value>,
    /// `data.event.ts` when the source fixes it (recording steps, pass-through); else the time
    /// the message is processed.
    pub(super) ts: Option<Value>,
}

impl Mapped {
    fn new(id: &'static str, attributes: Map<String, Value>) -> Self {
        Self {
            id: Cow::Borrowed(id),
            attributes,
            ts: None,
        }
    }

    /// `attributes.meeting[key]` as a string.
    pub fn meeting_field(&self, key: &str) -> Option<&str> {
        self.attributes.get("meeting")?.get(key)?.as_str()
    }

    /// `attributes.user["internal-user-id"]`.
    pub fn user_id(&self) -> Option<&str> {
        self.attributes
            .get("user")?
            .get("internal-user-id")?
            .as_str()
    }
}

type MapFn = fn(&Message, &Mappings) -> Result<Option<Mapped>, MapError>;

/// Bus message name -> what it needs, and its mapping function.
const TABLE: &[(&str, Needs, MapFn)] = &[
    ("MeetingCreatedEvtMsg", CORE, meeting::created),
    ("MeetingDestroyedEvtMsg", CORE, meeting::ended),
    (
        "RecordingStatusChangedEvtMsg",
        CORE,
        meeting::recording_status,
    ),
    (
        "ScreenshareRtmpBroadcastStartedEvtMsg",
        CORE,
        meeting::screenshare_started,
    ),
    (
        "ScreenshareRtmpBroadcastStoppedEvtMsg",
        CORE,
        meeting::screenshare_stopped,
    ),
    (
        "SetCurrentPresentationEvtMsg",
        CORE,
        meeting::presentation_changed,
    ),
    ("UserJoinedMeetingEvtMsg", USER, user::joined),
    ("UserLeftMeetingEvtMsg", USER, user::left),
    (
        "UserJoinedVoiceConfToClientEvtMsg",
        USER,
        user::voice_enabled,
    ),
    (
        "UserLeftVoiceConfToClientEvtMsg",
        USER,
        user::voice_disabled,
    ),
    ("UserMutedVoiceEvtMsg", USER, user::muted),
    ("UserBroadcastCamStartedEvtMsg", USER, user::cam_started),
    ("UserBroadcastCamStoppedEvtMsg", USER, user::cam_stopped),
    ("PresenterAssignedEvtMsg", USER, user::presenter_assigned),
    (
        "PresenterUnassignedEvtMsg",
        USER,
        user::presenter_unassigned,
    ),
    ("UserEmojiChangedEvtMsg", USER, user::emoji_changed),
    ("UserReactionEmojiChangedEvtMsg", USER, user::emoji_changed),
    ("UserRaiseHandChangedEvtMsg", USER, user::raise_hand_changed),
    (
        "GroupChatMessageBroadcastEvtMsg",
        CHAT,
        content::chat_message,
    ),
    ("PollStartedEvtMsg", POLL_STARTED, content::poll_started),
    (
        "UserRespondedToPollRespMsg",
        POLL_RESPONDED,
        content::poll_responded,
    ),
    ("PadContentEvtMsg", CORE, content::pad_content),
    ("TranscriptUpdatedEvtMsg", CORE, content::transcript_updated),
    ("PublishedRecordingSysMsg", CORE, recording::sys_msg),
    ("UnpublishedRecordingSysMsg", CORE, recording::sys_msg),
    ("DeletedRecordingSysMsg", CORE, recording::sys_msg),
    // Beyond the reference's catalogue (BBB 3.x; [`BEYOND_REFERENCE`]).
    ("MeetingEndingEvtMsg", CORE, meeting::ending),
    (
        "BreakoutRoomStartedEvtMsg",
        BREAKOUT_STARTED,
        meeting::breakout_started,
    ),
    (
        "BreakoutRoomEndedEvtMsg",
        BREAKOUT_ENDED,
        meeting::breakout_ended,
    ),
    ("UserRoleChangedEvtMsg", ROLE_CHANGED, user::role_changed),
    ("UserAwayChangedEvtMsg", USER, user::away_changed),
    ("ActivateTimerRespMsg", USER, timer::changed),
    ("DeactivateTimerRespMsg", USER, timer::changed),
    ("StartTimerRespMsg", USER, timer::changed),
    ("StopTimerRespMsg", USER, timer::changed),
    ("SwitchTimerRespMsg", USER, timer::changed),
    ("SetTimerRespMsg", USER, timer::changed),
    ("ResetTimerRespMsg", USER, timer::changed),
    ("TimerEndedEvtMsg", CORE, timer::changed),
];

static BY_NAME: LazyLock<HashMap<&'static str, (&'static str, Needs, MapFn)>> =
    LazyLock::new(|| TABLE.iter().map(|row| (row.0, *row)).collect());

/// The bus messages of the catalogue, and whether each needs a user id (for tests).
#[cfg(test)]
pub(crate) fn message_kinds() -> impl Iterator<Item = (&'static str, bool)> {
    TABLE
        .iter()
        .map(|(name, needs, _)| (*name, needs.needs_user()))
}

/// Every id a processed event can have.
pub const OUTPUT_IDS: &[&str] = &[
    "meeting-created",
    "meeting-ended",
    "meeting-recording-started",
    "meeting-recording-stopped",
    "meeting-recording-unhandled",
    "meeting-screenshare-started",
    "meeting-screenshare-stopped",
    "meeting-presentation-changed",
    "meeting-ending",
    "breakout-room-started",
    "breakout-room-ended",
    "user-joined",
    "user-left",
    "user-audio-voice-enabled",
    "user-audio-voice-disabled",
    "user-audio-muted",
    "user-audio-unmuted",
    "user-audio-unhandled",
    "user-cam-broadcast-start",
    "user-cam-broadcast-end",
    "user-presenter-assigned",
    "user-presenter-unassigned",
    "user-emoji-changed",
    "user-raise-hand-changed",
    "user-role-changed",
    "user-away-changed",
    "chat-group-message-sent",
    "poll-started",
    "poll-responded",
    "pad-content",
    "transcript-updated",
    "timer-activated",
    "timer-started",
    "timer-stopped",
    "timer-switched",
    "timer-set",
    "timer-reset",
    "timer-ended",
    "timer-deactivated",
    "rap-published",
    "rap-unpublished",
    "rap-deleted",
    "rap-archive-started",
    "rap-archive-ended",
    "rap-sanity-started",
    "rap-sanity-ended",
    "rap-post-archive-started",
    "rap-post-archive-ended",
    "rap-process-started",
    "rap-process-ended",
    "rap-post-process-started",
    "rap-post-process-ended",
    "rap-publish-started",
    "rap-publish-ended",
    "rap-post-publish-started",
    "rap-post-publish-ended",
    "rap-post-events-started",
    "rap-post-events-ended",
];

/// The events about hooks (`docs/receivers.md`), in the order a hook's troubles go: made by
/// delivery, not from the bus, and sent only to hooks naming them.
pub(crate) const ABOUT_HOOKS: [&str; 4] = [
    "hook-failing",
    "hook-disabled",
    "hook-removed",
    "hook-recovered",
];

/// The ids of [`OUTPUT_IDS`] that the reference service never sends (BBB 3.x's breakout rooms,
/// why a meeting ends, role and away changes, the timer): they go only to hooks whose eventID
/// names them, unless the operator sets `[events] beyond_reference = true`.
pub(crate) const BEYOND_REFERENCE: &[&str] = &[
    "meeting-ending",
    "breakout-room-started",
    "breakout-room-ended",
    "user-role-changed",
    "user-away-changed",
    "timer-activated",
    "timer-started",
    "timer-stopped",
    "timer-switched",
    "timer-set",
    "timer-reset",
    "timer-ended",
    "timer-deactivated",
];

/// Whether `id` is one of [`BEYOND_REFERENCE`].
pub(crate) fn beyond_reference(id: &str) -> bool {
    BEYOND_REFERENCE.contains(&id)
}

/// Maps one message; `Ok(None)` when the relay does not deliver that message.
///
/// # Errors
/// When the message names a known event but lacks what that event needs, or has it with the
/// wrong type ([`needs`]).
pub(crate) fn map(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    if let Some((kind, needs, f)) = BY_NAME.get(msg.name.as_str()) {
        needs::check(msg, kind, *needs)?;
        return f(msg, mappings);
    }
    if let Some(m) = recording::rap_step(msg, mappings)? {
        return Ok(Some(m));
    }
    pass_through(msg)
}

/// An already processed event on the bus (v3 accepts these and forwards them).
fn pass_through(msg: &Message) -> Result<Option<Mapped>, MapError> {
    let Some(id) = path(&msg.value, &["data", "id"])
        .and_then(Value::as_str)
        .and_then(|id| OUTPUT_IDS.iter().find(|o| **o == id))
    else {
        return Ok(None);
    };
    let attributes = path(&msg.value, &["data", "attributes"])
        .and_then(Value::as_object)
        .filter(|a| a.get("meeting").is_some_and(Value::is_object))
        .ok_or(MapError::Missing {
            message: "processed event",
            field: "data.attributes.meeting",
        })?;
    Ok(Some(Mapped {
        id: Cow::Borrowed(id),
        attributes: attributes.clone(),
        ts: path(&msg.value, &["data", "event", "ts"]).cloned(),
    }))
}

/// The processed event JSON, compact, keys in the reference's order.
pub(crate) fn to_json(mapped: &Mapped, now_ms: u64) -> String {
    let ts = mapped.ts.clone().unwrap_or_else(|| now_ms.into());
    json!({"data": {
        "type": "event",
        "id": mapped.id,
        "attributes": mapped.attributes,
        "event": {"ts": ts},
    }})
    .to_string()
}

/// Inserts `key` when the source value exists (a `null` source stays `null`).
fn put(map: &mut Map<String, Value>, key: &str, source: Option<&Value>) {
    if let Some(v) = source {
        map.insert(key.to_string(), v.clone());
    }
}

/// `{"internal-meeting-id": MID, "external-meeting-id": EMID}`, each omitted when unknown.
fn meeting_block(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(mid) = msg.meeting_id() {
        m.insert("internal-meeting-id".into(), mid.into());
        if let Some(emid) = mappings.external_meeting(mid) {
            m.insert("external-meeting-id".into(), emid.into());
        }
    }
    m
}

/// Attributes holding just the meeting block.
fn with_meeting(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut a = Map::new();
    a.insert(
        "meeting".into(),
        Value::Object(meeting_block(msg, mappings)),
    );
    a
}

#[cfg(test)]
mod tests;

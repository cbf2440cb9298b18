//! What each event id's `data.attributes` holds, as a schema, with a sentence saying what the
//! event is. The parts events share (a meeting, a user) are `$defs`, so that generated types
//! share them too. Fields copied from a bus message have the type BigBlueButton gives them.

use serde_json::{Map, Value, json};

use super::object;

pub(super) fn string() -> Value {
    json!({"type": "string"})
}

pub(super) fn integer() -> Value {
    json!({"type": "integer"})
}

pub(super) fn boolean() -> Value {
    json!({"type": "boolean"})
}

pub(super) fn def(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

/// A `$defs` part with `required` added for one event.
pub(super) fn def_requiring(name: &str, required: &[&str]) -> Value {
    json!({"$ref": format!("#/$defs/{name}"), "required": required})
}

/// The parts several events share.
fn defs() -> Map<String, Value> {
    let mut d = Map::new();
    d.insert(
        "meeting".into(),
        object(
            &["internal-meeting-id"],
            json!({
                "internal-meeting-id": {"type": "string", "description": "BigBlueButton's internal meeting id."},
                "external-meeting-id": {"type": "string", "description": "The meetingID the meeting was created with (absent when the relay never saw it created)."},
            }),
        ),
    );
    d.insert(
        "user".into(),
        object(
            &[],
            json!({
                "internal-user-id": {"type": "string", "description": "BigBlueButton's internal user id."},
                "external-user-id": {"type": "string", "description": "The userID given at join (from the user's user-joined), else the internal id's external form, else empty."},
                "name": string(),
                "role": {"type": "string", "description": "MODERATOR or VIEWER."},
                "presenter": boolean(),
                "ip-address": string(),
                "user-agent": string(),
                "referer": string(),
                "session-token": string(),
                "userdata": {"type": "object", "description": "The userdata-* parameters of the join call."},
                "stream": string(),
                "guest": boolean(),
                "listening-only": boolean(),
                "sharing-mic": boolean(),
                "muted": boolean(),
                "emoji": string(),
                "raise-hand": boolean(),
                "away": boolean(),
            }),
        ),
    );
    d.insert(
        "hook".into(),
        object(
            &["id", "callback-url", "failures"],
            json!({
                "id": integer(),
                "callback-url": string(),
                "last-status": {"type": ["integer", "null"], "description": "The last attempt's HTTP status, when it got one."},
                "last-error": {"type": ["string", "null"]},
                "failures": {"type": "integer", "description": "Failed attempts in a row."},
            }),
        ),
    );
    d
}

/// The `$defs` that `schema` refers to.
pub(super) fn defs_used(schema: &Value) -> Map<String, Value> {
    let text = schema.to_string();
    defs()
        .into_iter()
        .filter(|(name, _)| text.contains(&format!("\"#/$defs/{name}\"")))
        .collect()
}

/// Attributes of a meeting (and `more`), each of `required` present.
pub(super) fn with_meeting(required: &[&str], more: Value) -> Value {
    let mut props = json!({"meeting": def("meeting")});
    if let (Some(p), Some(m)) = (props.as_object_mut(), more.as_object()) {
        p.extend(m.clone());
    }
    let mut req = vec!["meeting"];
    req.extend_from_slice(required);
    object(&req, props)
}

/// A meeting and a user, the user holding `user_required`.
pub(super) fn user_event(user_required: &[&str]) -> Value {
    with_meeting(
        &["user"],
        json!({"user": def_requiring("user", user_required)}),
    )
}

fn meeting_created() -> Value {
    object(
        &["meeting"],
        json!({"meeting": object(
            &["internal-meeting-id", "external-meeting-id"],
            json!({
                "internal-meeting-id": string(),
                "external-meeting-id": string(),
                "name": string(),
                "is-breakout": boolean(),
                "parent-id": {"type": "string", "description": "The parent meeting's internal id of a breakout room; bbb-none otherwise."},
                "duration": {"type": "integer", "description": "Minutes; 0: no limit."},
                "create-time": integer(),
                "create-date": string(),
                "moderator-pass": string(),
                "viewer-pass": string(),
                "record": boolean(),
                "voice-conf": string(),
                "dial-number": string(),
                "max-users": integer(),
                "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "The meta_* parameters of the create call."},
                "audioBridge": string(),
                "cameraBridge": string(),
                "screenShareBridge": string(),
            }),
        )}),
    )
}

/// A recording step of the recording pipeline (`bigbluebutton:from-rap`).
fn rap_step(id: &str) -> Value {
    let mut more = json!({
        "record-id": string(),
        "success": boolean(),
        "step-time": {"type": "integer", "description": "How long the step took, in milliseconds."},
        "workflow": {"type": "string", "description": "The playback format processed (presentation, video, ...)."},
    });
    let mut required = vec![];
    if id == "rap-archive-ended" {
        more["recorded"] = boolean();
        more["duration"] = integer();
        required.extend(["recorded", "duration"]);
    }
    if matches!(id, "rap-published" | "rap-unpublished" | "rap-deleted") {
        more["format"] = string();
    }
    if id == "rap-publish-ended" {
        more["recording"] = object(
            &[],
            json!({
                "name": string(),
                "is-breakout": {"type": ["string", "boolean"]},
                "start-time": integer(),
                "end-time": integer(),
                "size": integer(),
                "raw-size": integer(),
                "metadata": {"type": "object"},
                "playback": {"type": "object"},
                "download": {"type": ["object", "null"]},
            }),
        );
        required.push("recording");
    }
    with_meeting(&required, more)
}

/// What the event `id` is, and its attributes' schema; `None` for an id it does not know.
pub(super) fn of(id: &str) -> Option<(&'static str, Value)> {
    Some(match id {
        "meeting-created" => ("A meeting was created.", meeting_created()),
        "meeting-ended" => (
            "A meeting ended (after everyone still in it left: their user-left events come first).",
            with_meeting(&[], json!({})),
        ),
        "meeting-recording-started" => (
            "The meeting's recording was started.",
            with_meeting(&[], json!({})),
        ),
        "meeting-recording-stopped" => (
            "The meeting's recording was paused or stopped.",
            with_meeting(&[], json!({})),
        ),
        "meeting-recording-unhandled" => (
            "The meeting's recording status changed to something neither started nor stopped.",
            with_meeting(&[], json!({})),
        ),
        "meeting-screenshare-started" => (
            "A user started sharing their screen (external-user-id when the relay saw the user join).",
            user_event(&["internal-user-id"]),
        ),
        "meeting-screenshare-stopped" => (
            "A user stopped sharing their screen (external-user-id when the relay saw the user join).",
            user_event(&["internal-user-id"]),
        ),
        "meeting-presentation-changed" => (
            "The current presentation changed.",
            object(
                &["meeting"],
                json!({"meeting": {
                    "$ref": "#/$defs/meeting",
                    "properties": {"presentation-id": string()},
                }}),
            ),
        ),
        "user-joined" => (
            "A user joined the meeting.",
            user_event(&["internal-user-id", "external-user-id", "guest"]),
        ),
        "user-left" => (
            "A user left the meeting.",
            user_event(&["internal-user-id", "external-user-id", "guest"]),
        ),
        "user-audio-voice-enabled" => (
            "A user joined the audio (microphone or listen only).",
            user_event(&["internal-user-id", "external-user-id", "sharing-mic"]),
        ),
        "user-audio-voice-disabled" => (
            "A user left the audio.",
            user_event(&[
                "internal-user-id",
                "external-user-id",
                "listening-only",
                "sharing-mic",
                "muted",
            ]),
        ),
        "user-audio-muted" => (
            "A user was muted.",
            user_event(&["internal-user-id", "external-user-id", "muted"]),
        ),
        "user-audio-unmuted" => (
            "A user was unmuted.",
            user_event(&["internal-user-id", "external-user-id", "muted"]),
        ),
        "user-audio-unhandled" => (
            "A user's mute state changed to something neither muted nor unmuted.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "user-cam-broadcast-start" => (
            "A user started their camera.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "user-cam-broadcast-end" => (
            "A user stopped their camera.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "user-presenter-assigned" => (
            "A user became the presenter.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "user-presenter-unassigned" => (
            "A user stopped being the presenter.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "user-emoji-changed" => (
            "A user's status emoji or reaction changed (none: cleared).",
            user_event(&["internal-user-id", "external-user-id", "emoji"]),
        ),
        "user-raise-hand-changed" => (
            "A user raised or lowered their hand.",
            user_event(&["internal-user-id", "external-user-id"]),
        ),
        "chat-group-message-sent" => (
            "A message was sent to the meeting's public chat.",
            with_meeting(
                &["chat-message"],
                json!({
                    "chat-id": string(),
                    "chat-message": object(&["sender"], json!({
                        "id": string(),
                        "message": string(),
                        "sender": object(&[], json!({
                            "internal-user-id": string(),
                            "external-user-id": string(),
                            "name": string(),
                            "time": {"type": "integer", "description": "When it was sent, in milliseconds since the Unix epoch."},
                        })),
                    })),
                }),
            ),
        ),
        "poll-started" => (
            "A poll was started.",
            with_meeting(
                &["user", "poll"],
                json!({
                    "user": def_requiring("user", &["external-user-id"]),
                    "poll": object(&[], json!({
                        "id": string(),
                        "question": string(),
                        "answers": {"type": "array", "items": object(&[], json!({"id": integer(), "key": string()}))},
                    })),
                }),
            ),
        ),
        "poll-responded" => (
            "A user answered a poll.",
            with_meeting(
                &["user", "poll"],
                json!({
                    "user": def_requiring("user", &["external-user-id"]),
                    "poll": object(&[], json!({
                        "id": string(),
                        "answerIds": {"type": "array", "items": integer()},
                    })),
                }),
            ),
        ),
        "pad-content" => (
            "The shared notes changed.",
            with_meeting(
                &["pad"],
                json!({"pad": object(&[], json!({
                    "id": string(),
                    "external-pad-id": string(),
                    "rev": integer(),
                    "start": integer(),
                    "end": integer(),
                    "text": string(),
                }))}),
            ),
        ),
        "transcript-updated" => (
            "A user's speech was transcribed (final: the transcription will not change).",
            with_meeting(
                &["user", "transcript"],
                json!({
                    "user": def_requiring("user", &["external-user-id"]),
                    "transcript": object(&[], json!({
                        "id": string(),
                        "transcript": string(),
                        "locale": string(),
                        "final": boolean(),
                    })),
                }),
            ),
        ),
        "rap-published" => ("A recording was published.", rap_step(id)),
        "rap-unpublished" => ("A recording was unpublished.", rap_step(id)),
        "rap-deleted" => ("A recording was deleted.", rap_step(id)),
        id if id.starts_with("hook-") => (
            "An event about one of the owner's hooks (docs/receivers.md).",
            object(&["hook"], json!({"hook": def("hook")})),
        ),
        id if id.starts_with("rap-") => (
            "A step of the recording's processing (bigbluebutton:from-rap) started or ended.",
            rap_step(id),
        ),
        _ => return super::beyond::of(id),
    })
}

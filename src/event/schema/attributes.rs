//! What each event id's `data.attributes` holds, as a schema, with a sentence saying what the
//! event is. The parts events share (a meeting, a user) are `$defs`, so that generated types
//! share them too. Fields copied from a bus message have the type BigBlueButton gives them.
//! The reference's catalogue is a table ([`EVENTS`]); the shapes that only one event has are
//! the functions below it.

use serde_json::{Value, json};

use super::parts::{
    Row, Shape, boolean, def, def_requiring, find, integer, object, string, with_meeting,
};

/// The reference's events: id, what it is, the shape of its attributes.
const EVENTS: &[Row] = &[
    (
        "meeting-created",
        "A meeting was created.",
        Shape::Built(meeting_created),
    ),
    (
        "meeting-ended",
        "A meeting ended (after everyone still in it left: their user-left events come first).",
        Shape::Meeting,
    ),
    (
        "meeting-recording-started",
        "The meeting's recording was started.",
        Shape::Meeting,
    ),
    (
        "meeting-recording-stopped",
        "The meeting's recording was paused or stopped.",
        Shape::Meeting,
    ),
    (
        "meeting-recording-unhandled",
        "The meeting's recording status changed to something neither started nor stopped.",
        Shape::Meeting,
    ),
    (
        "meeting-screenshare-started",
        "A user started sharing their screen (external-user-id when the relay saw the user join).",
        Shape::User(&["internal-user-id"]),
    ),
    (
        "meeting-screenshare-stopped",
        "A user stopped sharing their screen (external-user-id when the relay saw the user join).",
        Shape::User(&["internal-user-id"]),
    ),
    (
        "meeting-presentation-changed",
        "The current presentation changed.",
        Shape::Built(presentation_changed),
    ),
    (
        "user-joined",
        "A user joined the meeting.",
        Shape::User(&["internal-user-id", "external-user-id", "guest"]),
    ),
    (
        "user-left",
        "A user left the meeting.",
        Shape::User(&["internal-user-id", "external-user-id", "guest"]),
    ),
    (
        "user-audio-voice-enabled",
        "A user joined the audio (microphone or listen only).",
        Shape::User(&["internal-user-id", "external-user-id", "sharing-mic"]),
    ),
    (
        "user-audio-voice-disabled",
        "A user left the audio.",
        Shape::User(&[
            "internal-user-id",
            "external-user-id",
            "listening-only",
            "sharing-mic",
            "muted",
        ]),
    ),
    (
        "user-audio-muted",
        "A user was muted.",
        Shape::User(&["internal-user-id", "external-user-id", "muted"]),
    ),
    (
        "user-audio-unmuted",
        "A user was unmuted.",
        Shape::User(&["internal-user-id", "external-user-id", "muted"]),
    ),
    (
        "user-audio-unhandled",
        "A user's mute state changed to something neither muted nor unmuted.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "user-cam-broadcast-start",
        "A user started their camera.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "user-cam-broadcast-end",
        "A user stopped their camera.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "user-presenter-assigned",
        "A user became the presenter.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "user-presenter-unassigned",
        "A user stopped being the presenter.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "user-emoji-changed",
        "A user's status emoji or reaction changed (none: cleared).",
        Shape::User(&["internal-user-id", "external-user-id", "emoji"]),
    ),
    (
        "user-raise-hand-changed",
        "A user raised or lowered their hand.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "chat-group-message-sent",
        "A message was sent to the meeting's public chat.",
        Shape::Built(chat_message_sent),
    ),
    (
        "poll-started",
        "A poll was started.",
        Shape::Built(poll_started),
    ),
    (
        "poll-responded",
        "A user answered a poll.",
        Shape::Built(poll_responded),
    ),
    (
        "pad-content",
        "The shared notes changed.",
        Shape::Built(pad_content),
    ),
    (
        "transcript-updated",
        "A user's speech was transcribed (final: the transcription will not change).",
        Shape::Built(transcript_updated),
    ),
    (
        "rap-published",
        "A recording was published.",
        Shape::ById(rap_step),
    ),
    (
        "rap-unpublished",
        "A recording was unpublished.",
        Shape::ById(rap_step),
    ),
    (
        "rap-deleted",
        "A recording was deleted.",
        Shape::ById(rap_step),
    ),
];

/// What the event `id` is, and its attributes' schema; `None` for an id of none of the
/// reference's events.
pub(super) fn of(id: &str) -> Option<(&'static str, Value)> {
    if let Some(found) = find(EVENTS, id) {
        return Some(found);
    }
    if id.starts_with("hook-") {
        let hook = object(&["hook"], json!({"hook": def("hook")}));
        return Some((
            "An event about one of the owner's hooks (docs/receivers.md).",
            hook,
        ));
    }
    id.starts_with("rap-").then(|| {
        (
            "A step of the recording's processing (bigbluebutton:from-rap) started or ended.",
            rap_step(id),
        )
    })
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

fn presentation_changed() -> Value {
    object(
        &["meeting"],
        json!({"meeting": {
            "$ref": "#/$defs/meeting",
            "properties": {"presentation-id": string()},
        }}),
    )
}

fn chat_message_sent() -> Value {
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
    )
}

fn poll_started() -> Value {
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
    )
}

fn poll_responded() -> Value {
    with_meeting(
        &["user", "poll"],
        json!({
            "user": def_requiring("user", &["external-user-id"]),
            "poll": object(&[], json!({
                "id": string(),
                "answerIds": {"type": "array", "items": integer()},
            })),
        }),
    )
}

fn pad_content() -> Value {
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
    )
}

fn transcript_updated() -> Value {
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
    )
}

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

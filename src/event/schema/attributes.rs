//! What each event id's `data.attributes` holds, as a schema, with a sentence saying what the
//! event is. The parts events share (a meeting, a user) are `$defs`, so that generated types
//! share them too. Fields copied from a bus message have the type BigBlueButton gives them.

use serde_json::{Map, Value, json};

use super::object;

fn string() -> Value {
    json!({"type": "string"})
}

fn integer() -> Value {
    json!({"type": "integer"})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn def(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

/// A `$defs` part with `required` added for one event.
fn def_requiring(name: &str, required: &[&str]) -> Value {
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
            &["external-user-id"],
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
fn with_meeting(required: &[&str], more: Value) -> Value {
    let mut props = json!({"meeting": def("meeting")});
    if let (Some(p), Some(m)) = (props.as_object_mut(), more.as_object()) {
        p.extend(m.clone());
    }
    let mut req = vec!["meeting"];
    req.extend_from_slice(required);
    object(&req, props)
}

/// A meeting and a user, the user holding `user_required`.
fn user_event(user_required: &[&str]) -> Value {
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
            "A user started sharing their screen.",
            user_event(&["internal-user-id"]),
        ),
        "meeting-screenshare-stopped" => (
            "A user stopped sharing their screen.",
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
            user_event(&["internal-user-id", "guest"]),
        ),
        "user-left" => (
            "A user left the meeting.",
            user_event(&["internal-user-id", "guest"]),
        ),
        "user-audio-voice-enabled" => (
            "A user joined the audio (microphone or listen only).",
            user_event(&["internal-user-id", "sharing-mic"]),
        ),
        "user-audio-voice-disabled" => (
            "A user left the audio.",
            user_event(&["internal-user-id", "listening-only", "sharing-mic", "muted"]),
        ),
        "user-audio-muted" => (
            "A user was muted.",
            user_event(&["internal-user-id", "muted"]),
        ),
        "user-audio-unmuted" => (
            "A user was unmuted.",
            user_event(&["internal-user-id", "muted"]),
        ),
        "user-audio-unhandled" => (
            "A user's mute state changed to something neither muted nor unmuted.",
            user_event(&["internal-user-id"]),
        ),
        "user-cam-broadcast-start" => (
            "A user started their camera.",
            user_event(&["internal-user-id"]),
        ),
        "user-cam-broadcast-end" => (
            "A user stopped their camera.",
            user_event(&["internal-user-id"]),
        ),
        "user-presenter-assigned" => (
            "A user became the presenter.",
            user_event(&["internal-user-id"]),
        ),
        "user-presenter-unassigned" => (
            "A user stopped being the presenter.",
            user_event(&["internal-user-id"]),
        ),
        "user-emoji-changed" => (
            "A user's status emoji or reaction changed (none: cleared).",
            user_event(&["internal-user-id", "emoji"]),
        ),
        "user-raise-hand-changed" => (
            "A user raised or lowered their hand.",
            user_event(&["internal-user-id"]),
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
                    "user": def("user"),
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
                    "user": def("user"),
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
                    "user": def("user"),
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
        _ => return beyond(id),
    })
}

/// The events beyond the reference's catalogue.
fn beyond(id: &str) -> Option<(&'static str, Value)> {
    let timer = |required: &[&str]| {
        object(
            required,
            json!({
                "stopwatch": {"type": "boolean", "description": "true: a stopwatch (counts up); false: a countdown."},
                "running": boolean(),
                "time": {"type": "integer", "description": "The countdown's length, in milliseconds."},
                "accumulated": {"type": "integer", "description": "Milliseconds run before the current run; in timer-stopped, all the time it ran."},
                "track": {"type": "string", "description": "The music track played with it (noTrack: none)."},
            }),
        )
    };
    let acted = |description, timer_required: Option<&[&str]>| {
        let mut more = json!({"user": def("user")});
        let mut required = vec!["user"];
        if let Some(t) = timer_required {
            more["timer"] = timer(t);
            required.push("timer");
        }
        (description, with_meeting(&required, more))
    };
    let room = |required: &[&str]| {
        object(
            required,
            json!({
                "internal-meeting-id": {"type": "string", "description": "The room's internal meeting id (its own meeting-created has it)."},
                "external-meeting-id": {"type": "string", "description": "The room's meetingID."},
                "name": string(),
                "short-name": string(),
                "sequence": {"type": "integer", "description": "The room's number, from 1."},
                "is-default-name": boolean(),
                "free-join": {"type": "boolean", "description": "Users may pick the room themselves."},
                "capture-notes": boolean(),
                "capture-slides": boolean(),
            }),
        )
    };
    Some(match id {
        "meeting-ending" => (
            "The meeting is ending, and why (meeting-ended follows).",
            with_meeting(
                &[],
                json!({
                    "reason": {"type": "string", "description": "akka-apps' MeetingEndReason: ENDED_FROM_API, ENDED_WHEN_NOT_JOINED, ENDED_WHEN_LAST_USER_LEFT, ENDED_AFTER_USER_LOGGED_OUT, ENDED_AFTER_EXCEEDING_DURATION, BREAKOUT_ENDED_EXCEEDING_DURATION, BREAKOUT_ENDED_BY_MOD, ENDED_DUE_TO_NO_AUTHED_USER, ENDED_DUE_TO_NO_MODERATOR, ..."},
                    "ended-by": def("user"),
                }),
            ),
        ),
        "breakout-room-started" => (
            "A breakout room of the meeting started (meeting: the parent meeting).",
            with_meeting(
                &["breakout"],
                json!({"breakout": room(&["internal-meeting-id"])}),
            ),
        ),
        "breakout-room-ended" => (
            "A breakout room of the meeting ended (meeting: the parent meeting).",
            with_meeting(
                &["breakout"],
                json!({"breakout": room(&["internal-meeting-id"])}),
            ),
        ),
        "user-role-changed" => (
            "A user's role changed (user: whose role, with the new one; changed-by: who changed it).",
            with_meeting(
                &["user"],
                json!({
                    "user": def_requiring("user", &["internal-user-id", "role"]),
                    "changed-by": def("user"),
                }),
            ),
        ),
        "user-away-changed" => (
            "A user set or cleared their away status.",
            user_event(&["internal-user-id", "away"]),
        ),
        "timer-activated" => acted(
            "The meeting's timer was shown, with its settings.",
            Some(&["stopwatch", "running", "time", "accumulated"]),
        ),
        "timer-started" => acted("The meeting's timer was started.", None),
        "timer-stopped" => acted(
            "The meeting's timer was stopped (timer.accumulated: how long it ran).",
            Some(&["accumulated"]),
        ),
        "timer-switched" => acted(
            "The meeting's timer was switched between stopwatch and countdown.",
            Some(&["stopwatch"]),
        ),
        "timer-set" => acted("The countdown's length was set.", Some(&["time"])),
        "timer-reset" => acted("The meeting's timer was reset.", None),
        "timer-deactivated" => acted("The meeting's timer was hidden.", None),
        "timer-ended" => (
            "The meeting's countdown reached zero.",
            with_meeting(&[], json!({})),
        ),
        _ => return None,
    })
}

//! The attributes' schemas of the events beyond the reference's catalogue (BBB 3.x's breakout
//! rooms, why a meeting ends, role and away changes, the timer), from the parts of
//! [`super::attributes`].

use serde_json::{Value, json};

use super::{
    attributes::{boolean, def_requiring, string, user_event, with_meeting},
    object,
};

/// What the event `id` is and its attributes' schema; `None` for an id it does not know.
pub(super) fn of(id: &str) -> Option<(&'static str, Value)> {
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
        let mut more =
            json!({"user": def_requiring("user", &["internal-user-id", "external-user-id"])});
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
                    "ended-by": def_requiring("user", &["internal-user-id", "external-user-id"]),
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
                    "user": def_requiring("user", &["internal-user-id", "external-user-id", "role"]),
                    "changed-by": def_requiring("user", &["internal-user-id", "external-user-id"]),
                }),
            ),
        ),
        "user-away-changed" => (
            "A user set or cleared their away status.",
            user_event(&["internal-user-id", "external-user-id"]),
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

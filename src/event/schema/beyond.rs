//! The attributes' schemas of the events beyond the reference's catalogue (BBB 3.x's breakout
//! rooms, why a meeting ends, role and away changes, the timer), from the parts of
//! [`super::parts`].

use serde_json::{Value, json};

use super::parts::{Row, Shape, boolean, def_requiring, find, object, string, with_meeting};

/// The events beyond the reference's catalogue: id, what it is, the shape of its attributes.
const EVENTS: &[Row] = &[
    (
        "meeting-ending",
        "The meeting is ending, and why (meeting-ended follows).",
        Shape::Built(meeting_ending),
    ),
    (
        "breakout-room-started",
        "A breakout room of the meeting started (meeting: the parent meeting).",
        Shape::Built(breakout),
    ),
    (
        "breakout-room-ended",
        "A breakout room of the meeting ended (meeting: the parent meeting).",
        Shape::Built(breakout),
    ),
    (
        "user-role-changed",
        "A user's role changed (user: whose role, with the new one; changed-by: who changed it).",
        Shape::Built(user_role_changed),
    ),
    (
        "user-away-changed",
        "A user set or cleared their away status.",
        Shape::User(&["internal-user-id", "external-user-id"]),
    ),
    (
        "timer-activated",
        "The meeting's timer was shown, with its settings.",
        Shape::Holding(
            timer_event,
            &["stopwatch", "running", "time", "accumulated"],
        ),
    ),
    (
        "timer-started",
        "The meeting's timer was started.",
        Shape::Holding(timer_event, &[]),
    ),
    (
        "timer-stopped",
        "The meeting's timer was stopped (timer.accumulated: how long it ran).",
        Shape::Holding(timer_event, &["accumulated"]),
    ),
    (
        "timer-switched",
        "The meeting's timer was switched between stopwatch and countdown.",
        Shape::Holding(timer_event, &["stopwatch"]),
    ),
    (
        "timer-set",
        "The countdown's length was set.",
        Shape::Holding(timer_event, &["time"]),
    ),
    (
        "timer-reset",
        "The meeting's timer was reset.",
        Shape::Holding(timer_event, &[]),
    ),
    (
        "timer-deactivated",
        "The meeting's timer was hidden.",
        Shape::Holding(timer_event, &[]),
    ),
    (
        "timer-ended",
        "The meeting's countdown reached zero.",
        Shape::Meeting,
    ),
];

/// What the event `id` is and its attributes' schema; `None` for an id it does not know.
pub(super) fn of(id: &str) -> Option<(&'static str, Value)> {
    find(EVENTS, id)
}

/// A meeting, the user who acted on its timer and, when `timer_required` names fields, the
/// timer holding them.
fn timer_event(timer_required: &[&str]) -> Value {
    let mut more =
        json!({"user": def_requiring("user", &["internal-user-id", "external-user-id"])});
    let mut required = vec!["user"];
    if !timer_required.is_empty() {
        more["timer"] = timer(timer_required);
        required.push("timer");
    }
    with_meeting(&required, more)
}

/// A meeting (the parent) and one of its breakout rooms.
fn breakout() -> Value {
    with_meeting(
        &["breakout"],
        json!({"breakout": room(&["internal-meeting-id"])}),
    )
}

/// The meeting's timer, each of `required` present.
fn timer(required: &[&str]) -> Value {
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
}

/// A breakout room, each of `required` present.
fn room(required: &[&str]) -> Value {
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
}

fn meeting_ending() -> Value {
    with_meeting(
        &[],
        json!({
            "reason": {"type": "string", "description": "akka-apps' MeetingEndReason: ENDED_FROM_API, ENDED_WHEN_NOT_JOINED, ENDED_WHEN_LAST_USER_LEFT, ENDED_AFTER_USER_LOGGED_OUT, ENDED_AFTER_EXCEEDING_DURATION, BREAKOUT_ENDED_EXCEEDING_DURATION, BREAKOUT_ENDED_BY_MOD, ENDED_DUE_TO_NO_AUTHED_USER, ENDED_DUE_TO_NO_MODERATOR, ..."},
            "ended-by": def_requiring("user", &["internal-user-id", "external-user-id"]),
        }),
    )
}

fn user_role_changed() -> Value {
    with_meeting(
        &["user"],
        json!({
            "user": def_requiring("user", &["internal-user-id", "external-user-id", "role"]),
            "changed-by": def_requiring("user", &["internal-user-id", "external-user-id"]),
        }),
    )
}

//! The attributes' schemas of the events beyond the reference's catalogue (BBB 3.x's breakout
//! rooms, why a meeting ends, role and away changes, the timer), from the parts of
//! [`super::parts`].

use serde_json::{Value, json};

use super::parts::{boolean, def_requiring, object, string, user_event, with_meeting};

/// How an event's attributes are shaped.
enum Shape {
    /// A meeting, nothing more.
    Meeting,
    /// A meeting and a user holding these fields.
    User(&'static [&'static str]),
    /// A meeting (the parent) and one of its breakout rooms.
    Breakout,
    /// A meeting, the user who acted on its timer and, when given, the timer holding these
    /// fields.
    Timer(Option<&'static [&'static str]>),
    /// One of its own.
    Built(fn() -> Value),
}

impl Shape {
    fn schema(&self) -> Value {
        match self {
            Self::Meeting => with_meeting(&[], json!({})),
            Self::User(required) => user_event(required),
            Self::Breakout => with_meeting(
                &["breakout"],
                json!({"breakout": room(&["internal-meeting-id"])}),
            ),
            Self::Timer(timer_required) => {
                let mut more = json!({"user": def_requiring("user", &["internal-user-id", "external-user-id"])});
                let mut required = vec!["user"];
                if let Some(t) = timer_required {
                    more["timer"] = timer(t);
                    required.push("timer");
                }
                with_meeting(&required, more)
            }
            Self::Built(build) => build(),
        }
    }
}

/// The events beyond the reference's catalogue: id, what it is, the shape of its attributes.
const EVENTS: &[(&str, &str, Shape)] = &[
    (
        "meeting-ending",
        "The meeting is ending, and why (meeting-ended follows).",
        Shape::Built(meeting_ending),
    ),
    (
        "breakout-room-started",
        "A breakout room of the meeting started (meeting: the parent meeting).",
        Shape::Breakout,
    ),
    (
        "breakout-room-ended",
        "A breakout room of the meeting ended (meeting: the parent meeting).",
        Shape::Breakout,
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
        Shape::Timer(Some(&["stopwatch", "running", "time", "accumulated"])),
    ),
    (
        "timer-started",
        "The meeting's timer was started.",
        Shape::Timer(None),
    ),
    (
        "timer-stopped",
        "The meeting's timer was stopped (timer.accumulated: how long it ran).",
        Shape::Timer(Some(&["accumulated"])),
    ),
    (
        "timer-switched",
        "The meeting's timer was switched between stopwatch and countdown.",
        Shape::Timer(Some(&["stopwatch"])),
    ),
    (
        "timer-set",
        "The countdown's length was set.",
        Shape::Timer(Some(&["time"])),
    ),
    (
        "timer-reset",
        "The meeting's timer was reset.",
        Shape::Timer(None),
    ),
    (
        "timer-deactivated",
        "The meeting's timer was hidden.",
        Shape::Timer(None),
    ),
    (
        "timer-ended",
        "The meeting's countdown reached zero.",
        Shape::Meeting,
    ),
];

/// What the event `id` is and its attributes' schema; `None` for an id it does not know.
pub(super) fn of(id: &str) -> Option<(&'static str, Value)> {
    let (_, description, shape) = EVENTS.iter().find(|(known, ..)| *known == id)?;
    Some((description, shape.schema()))
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

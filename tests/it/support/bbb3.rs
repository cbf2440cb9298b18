//! The BBB 3.x bus messages of `tests/fixtures/bbb-3x/` (built from BigBlueButton's case
//! classes; its README cites them), in the recorded meeting of the shared fixtures.

use serde_json::Value;

/// The akka-apps messages, in the order a meeting has them (the recording's `post_events_*`
/// steps come after the meeting, `MeetingEndingEvtMsg` last).
pub(crate) const MESSAGES: &[&str] = &[
    "BreakoutRoomStartedEvtMsg",
    "UserRoleChangedEvtMsg",
    "UserAwayChangedEvtMsg",
    "ActivateTimerRespMsg",
    "StartTimerRespMsg",
    "StopTimerRespMsg",
    "SwitchTimerRespMsg",
    "SetTimerRespMsg",
    "ResetTimerRespMsg",
    "TimerEndedEvtMsg",
    "DeactivateTimerRespMsg",
    "BreakoutRoomEndedEvtMsg",
    "MeetingEndingEvtMsg",
];

/// The recording's steps of the reference 3.7 (`bigbluebutton:from-rap`).
pub(crate) const POST_EVENTS: [&str; 2] = ["post_events_started", "post_events_ended"];

/// Fixture `name` as it is in the file.
pub(crate) fn message(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/bbb-3x/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("fixture JSON")
}

/// The Redis channel BBB publishes `name` on.
pub(crate) fn channel(name: &str) -> &'static str {
    match name {
        "BreakoutRoomStartedEvtMsg" => "from-akka-apps-pres-redis-channel",
        n if n.starts_with("post_events") => "bigbluebutton:from-rap",
        _ => "from-akka-apps-redis-channel",
    }
}

//! The meeting's timer (beyond the reference's catalogue; `TimerMsgs.scala` of
//! bbb-common-message): activated, started, stopped, switched, set, reset, ended, deactivated.
//! Each names the user who acted (the body's `userId`; the header has none) but `timer-ended`;
//! `timer` holds what the message says of the timer, times in milliseconds.

use serde_json::{Map, Value};

use super::{MapError, Mapped, put, user::user_ids, with_meeting};
use crate::event::{
    decode::{Message, truthy_str},
    mapping::Mappings,
};

/// Bus message -> event id and the body fields it carries into `timer`.
const KINDS: &[(&str, &str, &[&str])] = &[
    (
        "ActivateTimerRespMsg",
        "timer-activated",
        &["stopwatch", "running", "time", "accumulated", "track"],
    ),
    ("DeactivateTimerRespMsg", "timer-deactivated", &[]),
    ("StartTimerRespMsg", "timer-started", &[]),
    ("StopTimerRespMsg", "timer-stopped", &["accumulated"]),
    ("SwitchTimerRespMsg", "timer-switched", &["stopwatch"]),
    ("SetTimerRespMsg", "timer-set", &["time"]),
    ("ResetTimerRespMsg", "timer-reset", &[]),
    ("TimerEndedEvtMsg", "timer-ended", &[]),
];

/// Maps any of [`KINDS`].
pub(super) fn changed(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let Some((_, id, fields)) = KINDS.iter().find(|(name, ..)| *name == msg.name) else {
        return Ok(None);
    };
    let mut attributes = with_meeting(msg, m);
    // The body's user acted (akka-apps' header has none); a header's user otherwise.
    let uid = truthy_str(msg.body_field("userId")).or_else(|| msg.user_id());
    if let Some(uid) = uid {
        attributes.insert("user".into(), Value::Object(user_ids(msg, m, Some(uid))));
    }
    if !fields.is_empty() {
        let mut timer = Map::new();
        for field in *fields {
            put(&mut timer, field, msg.body_field(field));
        }
        attributes.insert("timer".into(), Value::Object(timer));
    }
    Ok(Some(Mapped::new(id, attributes)))
}

//! What each message kind needs before it can become an event: a message whose required
//! fields are missing or of the wrong type is skipped (and counted), never turned into an event
//! with empty attributes.

use serde_json::Value;

use super::MapError;
use crate::event::decode::{Message, is_set, path};

/// The fields one message kind requires.
#[derive(Debug, Clone, Copy)]
pub(super) struct Needs {
    /// The internal meeting id (the first set id of bbb-events.md 2.2) is a string.
    meeting: bool,
    /// The internal user id is a string.
    user: bool,
    /// `core.body.pollId` or `core.body.poll.id` is a string.
    poll_id: bool,
    /// Dotted paths that must hold JSON objects.
    objects: &'static [&'static str],
    /// Dotted paths that must hold strings (not empty).
    strings: &'static [&'static str],
}

impl Needs {
    #[cfg(test)]
    pub(super) fn needs_user(&self) -> bool {
        self.user
    }
}

/// Every message of bbb-apps-akka's shape: a meeting and a body.
pub(super) const CORE: Needs = Needs {
    meeting: true,
    user: false,
    poll_id: false,
    objects: &["core.body"],
    strings: &[],
};

/// A user event: also the user.
pub(super) const USER: Needs = Needs { user: true, ..CORE };

/// A chat message: also the message object.
pub(super) const CHAT: Needs = Needs {
    objects: &["core.body", "core.body.msg"],
    ..CORE
};

/// A poll started: also the poll and its id.
pub(super) const POLL_STARTED: Needs = Needs {
    poll_id: true,
    objects: &["core.body", "core.body.poll"],
    ..CORE
};

/// A poll answer: also the poll's id.
pub(super) const POLL_RESPONDED: Needs = Needs {
    poll_id: true,
    ..CORE
};

/// A recording pipeline step: a meeting and a payload.
pub(super) const RAP_STEP: Needs = Needs {
    objects: &["payload"],
    ..CORE
};

/// A breakout room started: also the room and its internal id.
pub(super) const BREAKOUT_STARTED: Needs = Needs {
    objects: &["core.body", "core.body.breakout"],
    strings: &["core.body.breakout.breakoutId"],
    ..CORE
};

/// A breakout room ended: also the room's internal id.
pub(super) const BREAKOUT_ENDED: Needs = Needs {
    strings: &["core.body.breakoutId"],
    ..CORE
};

/// A role changed: the user is the body's (the header names who changed it), and the role.
pub(super) const ROLE_CHANGED: Needs = Needs {
    strings: &["core.body.userId", "core.body.role"],
    ..CORE
};

/// Checks `msg` (of kind `kind`) against `needs`.
///
/// # Errors
/// The first required field that is missing or of the wrong type.
pub(super) fn check(msg: &Message, kind: &'static str, needs: Needs) -> Result<(), MapError> {
    for &field in needs.objects {
        match dotted(msg, field) {
            Some(Value::Object(_)) => {}
            None | Some(Value::Null) => return Err(MapError::missing(kind, field)),
            Some(_) => return Err(MapError::wrong_type(kind, field, "an object")),
        }
    }
    for &field in needs.strings {
        string_id(kind, field, dotted(msg, field))?;
    }
    if needs.meeting {
        string_id(kind, "meeting id", msg.meeting_id_value())?;
    }
    if needs.user {
        string_id(kind, "user id", msg.user_id_value())?;
    }
    if needs.poll_id {
        let id = msg
            .body_field("pollId")
            .filter(|v| is_set(v))
            .or_else(|| path(&msg.value, &["core", "body", "poll", "id"]));
        string_id(kind, "poll id", id)?;
    }
    Ok(())
}

/// The value at dotted path `field` of `msg` (as `path` walks it, without collecting the keys:
/// this runs for every required field of every bus message).
fn dotted<'a>(msg: &'a Message, field: &str) -> Option<&'a Value> {
    let mut keys = field.split('.');
    let mut cur = msg.value.get(keys.next()?)?;
    for k in keys {
        cur = cur.as_object()?.get(k)?;
    }
    Some(cur)
}

fn string_id(kind: &'static str, field: &'static str, v: Option<&Value>) -> Result<(), MapError> {
    match v.filter(|v| is_set(v)) {
        Some(Value::String(_)) => Ok(()),
        None => Err(MapError::missing(kind, field)),
        Some(_) => Err(MapError::wrong_type(kind, field, "a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::decode::decode;

    fn checked(text: &str, needs: Needs) -> Result<(), String> {
        check(&decode(text).unwrap(), "X", needs).map_err(|e| e.to_string())
    }

    #[test]
    fn the_issue_example_is_refused_for_its_meeting_id() {
        let text = r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg","routing":{"meetingId":5}},"core":{"body":[]}}"#;
        assert_eq!(
            checked(text, USER),
            Err("X: core.body is not an object".into())
        );
        let text = r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg","routing":{"meetingId":5}},"core":{"body":{}}}"#;
        assert_eq!(
            checked(text, USER),
            Err("X: meeting id is not a string".into())
        );
    }

    #[test]
    fn each_requirement() {
        let msg = |routing: &str, header: &str, body: &str| {
            format!(
                r#"{{"envelope":{{"name":"N","routing":{routing}}},"core":{{"header":{header},"body":{body}}}}}"#
            )
        };
        let good = msg(r#"{"meetingId":"m"}"#, r#"{"userId":"u"}"#, "{}");
        assert_eq!(checked(&good, USER), Ok(()));
        let no_user = msg(r#"{"meetingId":"m"}"#, r#"{"userId":"not-used"}"#, "{}");
        assert_eq!(checked(&no_user, CORE), Ok(()));
        assert_eq!(checked(&no_user, USER), Err("X: no user id".into()));
        let bad_user = msg(r#"{"meetingId":"m"}"#, r#"{"userId":7}"#, "{}");
        assert_eq!(
            checked(&bad_user, USER),
            Err("X: user id is not a string".into())
        );
        let no_meeting = msg("{}", "{}", "{}");
        assert_eq!(checked(&no_meeting, CORE), Err("X: no meeting id".into()));
        let chat = msg(r#"{"meetingId":"m"}"#, "{}", r#"{"msg":"hi"}"#);
        assert_eq!(
            checked(&chat, CHAT),
            Err("X: core.body.msg is not an object".into())
        );
        let poll = msg(r#"{"meetingId":"m"}"#, "{}", r#"{"poll":{"id":1}}"#);
        assert_eq!(
            checked(&poll, POLL_STARTED),
            Err("X: poll id is not a string".into())
        );
        let poll = msg(
            r#"{"meetingId":"m"}"#,
            "{}",
            r#"{"pollId":"","poll":{"id":"p"}}"#,
        );
        assert_eq!(checked(&poll, POLL_STARTED), Ok(()));
        let role = msg(
            r#"{"meetingId":"m"}"#,
            r#"{"userId":"changer"}"#,
            r#"{"role":"MODERATOR"}"#,
        );
        assert_eq!(
            checked(&role, ROLE_CHANGED),
            Err("X: no core.body.userId".into())
        );
        let role = msg(r#"{"meetingId":"m"}"#, "{}", r#"{"userId":"u","role":1}"#);
        assert_eq!(
            checked(&role, ROLE_CHANGED),
            Err("X: core.body.role is not a string".into())
        );
        let room = msg(
            r#"{"meetingId":"m"}"#,
            "{}",
            r#"{"breakout":{"breakoutId":""}}"#,
        );
        assert_eq!(
            checked(&room, BREAKOUT_STARTED),
            Err("X: no core.body.breakout.breakoutId".into())
        );
        assert_eq!(
            checked(
                r#"{"header":{"name":"archive_ended"},"payload":[]}"#,
                RAP_STEP
            ),
            Err("X: payload is not an object".into())
        );
    }
}

//! Decodes one bus message: parses the JSON, finds the message name and the derived ids (MID,
//! UID) of bbb-events.md 1.2-2.2. Never panics on any input.

use serde_json::{Map, Value};

/// Why a bus message was skipped.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("empty object")]
    Empty,
    #[error("no message name")]
    NoName,
}

impl DecodeError {
    /// A bounded metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotJson(_) => "not_json",
            Self::NotAnObject => "not_object",
            Self::Empty => "empty",
            Self::NoName => "no_name",
        }
    }
}

/// A parsed bus message.
#[derive(Debug)]
pub struct Message {
    pub(super) value: Map<String, Value>,
    /// `envelope.name` if set, else `header.name`, else `data.id` (an already processed event).
    pub(super) name: String,
}

/// Parses a bus message.
///
/// # Errors
/// When the text is not a non-empty JSON object with a message name.
pub(crate) fn decode(text: &str) -> Result<Message, DecodeError> {
    let value: Value = serde_json::from_str(text)?;
    let Value::Object(value) = value else {
        return Err(DecodeError::NotAnObject);
    };
    if value.is_empty() {
        return Err(DecodeError::Empty);
    }
    let name = [
        &["envelope", "name"][..],
        &["header", "name"],
        &["core", "header", "name"],
        &["data", "id"],
    ]
    .iter()
    .find_map(|p| truthy_str(path(&value, p)))
    .ok_or(DecodeError::NoName)?
    .to_string();
    Ok(Message { value, name })
}

/// A message's name as [`decode`] finds it, or `None`: for a trace's span, off the hot path.
pub(crate) fn message_name(text: &str) -> Option<String> {
    decode(text).ok().map(|m| m.name)
}

/// The value at a key path, if every step is an object holding the key.
pub(crate) fn path<'a>(root: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    let (first, rest) = keys.split_first()?;
    let mut cur = root.get(*first)?;
    for k in rest {
        cur = cur.as_object()?.get(*k)?;
    }
    Some(cur)
}

/// A non-empty string value.
pub(crate) fn truthy_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A set value: not null, not an empty string.
pub(crate) fn is_set(v: &Value) -> bool {
    !v.is_null() && v.as_str() != Some("")
}

/// A flag as BBB sends it: `true` or `"true"`; anything else is false.
pub(crate) fn flag(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s == "true",
        _ => false,
    }
}

/// JavaScript truthiness of an optional value (missing counts as false).
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

const MID_PATHS: &[&[&str]] = &[
    &["data", "attributes", "meeting", "internal-meeting-id"],
    &["envelope", "routing", "meetingId"],
    &["header", "body", "meetingId"],
    &["core", "body", "props", "meetingProp", "intId"],
    &["core", "body", "meetingId"],
    &["core", "header", "meetingId"],
    &["core", "body", "internalMeetingId"],
    &["core", "body", "recordId"],
    &["core", "body", "meeting_id"],
    &["payload", "meeting_id"],
];

const UID_PATHS: &[&[&str]] = &[
    &["data", "attributes", "user", "internal-user-id"],
    &["core", "header", "userId"],
    &["core", "body", "userId"],
];

fn first_set<'a>(
    root: &'a Map<String, Value>,
    paths: &[&[&str]],
    placeholder: Option<&str>,
) -> Option<&'a Value> {
    paths.iter().find_map(|p| {
        path(root, p).filter(|v| is_set(v) && (placeholder.is_none() || v.as_str() != placeholder))
    })
}

impl Message {
    /// The internal meeting id (MID): the first non-empty string of the chain in bbb-events.md 2.2.
    pub fn meeting_id(&self) -> Option<&str> {
        MID_PATHS
            .iter()
            .find_map(|p| truthy_str(path(&self.value, p)))
    }

    /// The internal user id (UID); the placeholder `not-used` does not count.
    pub fn user_id(&self) -> Option<&str> {
        UID_PATHS
            .iter()
            .find_map(|p| truthy_str(path(&self.value, p)).filter(|s| *s != "not-used"))
    }

    /// The value that stands for the meeting id: the first of the chain that is set (not null,
    /// not `""`), whatever its type, so that a wrong type is seen rather than skipped.
    pub fn meeting_id_value(&self) -> Option<&Value> {
        first_set(&self.value, MID_PATHS, None)
    }

    /// As [`Self::meeting_id_value`], for the user id (`not-used` counts as not set).
    pub fn user_id_value(&self) -> Option<&Value> {
        first_set(&self.value, UID_PATHS, Some("not-used"))
    }

    /// `core.body`, if it is an object.
    pub fn body(&self) -> Option<&Map<String, Value>> {
        path(&self.value, &["core", "body"]).and_then(Value::as_object)
    }

    /// `core.body.<key>`.
    pub fn body_field(&self, key: &str) -> Option<&Value> {
        self.body().and_then(|b| b.get(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        let m = decode(r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg","routing":{"meetingId":"mid"}},"core":{"header":{"name":"X","userId":"not-used"},"body":{"userId":"u2"}}}"#).unwrap();
        assert_eq!(m.name, "UserJoinedMeetingEvtMsg");
        assert_eq!(m.meeting_id(), Some("mid"));
        assert_eq!(m.user_id(), Some("u2"));
        let m =
            decode(r#"{"header":{"name":"archive_ended"},"payload":{"meeting_id":"r1"}}"#).unwrap();
        assert_eq!(m.name, "archive_ended");
        assert_eq!(m.meeting_id(), Some("r1"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            "",
            "nope",
            "[]",
            "{}",
            "1",
            "null",
            r#"{"envelope":{"name":5}}"#,
            r#"{"envelope":[]}"#,
        ] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn truthiness() {
        use serde_json::json;
        assert!(!truthy(None));
        assert!(!truthy(Some(&json!(0))));
        assert!(!truthy(Some(&json!(""))));
        assert!(truthy(Some(&json!("0"))));
        assert!(truthy(Some(&json!({}))));
    }
}

//! The parts the events' schemas are built from: plain types, references to the shared
//! `$defs` (a meeting, a user, a hook), the shapes most events have (a meeting; a meeting
//! and a user) and the [`Shape`] the catalogues' tables give each event.

use serde_json::{Map, Value, json};

/// A JSON object with these properties, of which `required` must be present.
pub(super) fn object(required: &[&str], properties: Value) -> Value {
    let mut o = Map::new();
    o.insert("type".into(), "object".into());
    if !required.is_empty() {
        o.insert("required".into(), json!(required));
    }
    o.insert("properties".into(), properties);
    Value::Object(o)
}

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

pub(super) fn def_requiring(name: &str, required: &[&str]) -> Value {
    json!({"$ref": format!("#/$defs/{name}"), "required": required})
}

pub(super) fn defs() -> Map<String, Value> {
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

pub(super) fn defs_used(schema: &Value) -> Map<String, Value> {
    let text = schema.to_string();
    defs()
        .into_iter()
        .filter(|(name, _)| text.contains(&format!("\"#/$defs/{name}\"")))
        .collect()
}

pub(super) fn with_meeting(required: &[&str], more: Value) -> Value {
    let mut props = json!({"meeting": def("meeting")});
    if let (Some(p), Some(m)) = (props.as_object_mut(), more.as_object()) {
        p.extend(m.clone());
    }
    let mut req = vec!["meeting"];
    req.extend_from_slice(required);
    object(&req, props)
}

pub(super) fn user_event(user_required: &[&str]) -> Value {
    with_meeting(
        &["user"],
        json!({"user": def_requiring("user", user_required)}),
    )
}

/// How an event's attributes are shaped.
pub(super) enum Shape {
    /// A meeting, nothing more.
    Meeting,
    /// A meeting and a user holding these fields.
    User(&'static [&'static str]),
    /// One of its own.
    Built(fn() -> Value),
    /// One of its own that depends on the event id (a recording's step).
    ById(fn(&str) -> Value),
    /// Built by the function from these fields (a timer holding them).
    Holding(fn(&[&str]) -> Value, &'static [&'static str]),
}

impl Shape {
    fn schema(&self, id: &str) -> Value {
        match self {
            Self::Meeting => with_meeting(&[], json!({})),
            Self::User(required) => user_event(required),
            Self::Built(build) => build(),
            Self::ById(build) => build(id),
            Self::Holding(build, fields) => build(fields),
        }
    }
}

/// A catalogue's row: the event id, what it is, the shape of its attributes.
pub(super) type Row = (&'static str, &'static str, Shape);

/// What the event `id` of the `table` is and its attributes' schema.
pub(super) fn find(table: &[Row], id: &str) -> Option<(&'static str, Value)> {
    let (_, description, shape) = table.iter().find(|(known, ..)| *known == id)?;
    Some((description, shape.schema(id)))
}

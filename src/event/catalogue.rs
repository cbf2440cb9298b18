//! Maps a decoded bus message to a processed webhook event (bbb-events.md section 2). One
//! function per message family; adding an event is one function and one row of [`TABLE`].

use serde_json::{Map, Value, json};

use super::{
    decode::{Message, path, truthy, truthy_str},
    mapping::Mappings,
};

/// Why a message that names a known event could not be mapped (it is dropped and counted).
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{message} without {field}")]
    Missing {
        message: &'static str,
        field: &'static str,
    },
}

/// A processed event before its timestamp is added.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub id: &'static str,
    pub attributes: Map<String, Value>,
}

type MapFn = fn(&Message, &Mappings) -> Result<Option<Mapped>, MapError>;

/// Bus message name -> mapping function.
const TABLE: &[(&str, MapFn)] = &[
    ("MeetingCreatedEvtMsg", meeting_created),
    ("MeetingDestroyedEvtMsg", meeting_ended),
    ("UserJoinedMeetingEvtMsg", user_joined),
    ("UserLeftMeetingEvtMsg", user_left),
];

/// Maps one message; `Ok(None)` when the relay does not deliver that message.
///
/// # Errors
/// When the message names a known event but lacks what that event needs.
pub fn map(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    match TABLE.iter().find(|(name, _)| *name == msg.name) {
        Some((_, f)) => f(msg, mappings),
        None => Ok(None),
    }
}

/// The processed event JSON, compact, keys in the reference's order.
pub fn to_json(mapped: &Mapped, ts_ms: u64) -> String {
    json!({"data": {
        "type": "event",
        "id": mapped.id,
        "attributes": mapped.attributes,
        "event": {"ts": ts_ms},
    }})
    .to_string()
}

/// Inserts `key` when the source value exists (a `null` source stays `null`).
fn put(map: &mut Map<String, Value>, key: &str, source: Option<&Value>) {
    if let Some(v) = source {
        map.insert(key.to_string(), v.clone());
    }
}

/// `{"internal-meeting-id": MID, "external-meeting-id": EMID}`, each omitted when unknown.
fn meeting_block(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(mid) = msg.meeting_id() {
        m.insert("internal-meeting-id".into(), mid.into());
        if let Some(emid) = mappings.external_meeting(mid) {
            m.insert("external-meeting-id".into(), emid.into());
        }
    }
    m
}

fn attributes_with_meeting(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut a = Map::new();
    a.insert(
        "meeting".into(),
        Value::Object(meeting_block(msg, mappings)),
    );
    a
}

/// The user template of bbb-events.md 2.4.3 (without the per-event keys).
fn user_block(msg: &Message, mappings: &Mappings) -> Map<String, Value> {
    let mut u = Map::new();
    let uid = msg.user_id();
    if let Some(uid) = uid {
        u.insert("internal-user-id".into(), uid.into());
    }
    // EUID-a: the stored mapping, else the body's extId, else "".
    let external = uid
        .and_then(|uid| mappings.user(uid))
        .map(|e| e.external.as_str())
        .filter(|s| !s.is_empty())
        .or_else(|| truthy_str(msg.body_field("extId")))
        .unwrap_or("");
    u.insert("external-user-id".into(), external.into());
    for (key, field) in [
        ("name", "name"),
        ("role", "role"),
        ("presenter", "presenter"),
        ("ip-address", "ipAddress"),
        ("user-agent", "userAgent"),
        ("referer", "referer"),
        ("session-token", "sessionToken"),
    ] {
        put(&mut u, key, msg.body_field(field));
    }
    if let Some(data) = ["userdata", "userMetadata", "userCustomData"]
        .iter()
        .map(|f| msg.body_field(f))
        .find(|v| truthy(*v))
    {
        put(&mut u, "userdata", data);
    }
    put(&mut u, "stream", msg.body_field("stream"));
    u
}

/// `guest` of user-joined / user-left: the body's flag, else the stored user's, coerced to bool.
fn guest(msg: &Message, mappings: &Mappings) -> bool {
    let from_body = msg.body_field("guest").filter(|v| !v.is_null());
    let stored = || {
        msg.user_id()
            .and_then(|uid| mappings.user(uid))
            .and_then(|e| e.user.get("guest"))
    };
    match from_body.or_else(stored) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

fn user_event(id: &'static str, msg: &Message, mappings: &Mappings) -> Mapped {
    let mut attributes = attributes_with_meeting(msg, mappings);
    let mut user = user_block(msg, mappings);
    if matches!(id, "user-joined" | "user-left") {
        user.insert("guest".into(), guest(msg, mappings).into());
    }
    attributes.insert("user".into(), Value::Object(user));
    Mapped { id, attributes }
}

fn meeting_created(msg: &Message, _: &Mappings) -> Result<Option<Mapped>, MapError> {
    const NAME: &str = "MeetingCreatedEvtMsg";
    let props = path(&msg.value, &["core", "body", "props"]).and_then(Value::as_object);
    let part = |field: &'static str| {
        props
            .and_then(|p| p.get(field))
            .and_then(Value::as_object)
            .ok_or(MapError::Missing {
                message: NAME,
                field,
            })
    };
    let meeting_prop = part("meetingProp")?;
    let breakout = part("breakoutProps")?;
    let duration = part("durationProps")?;
    let password = part("password")?;
    let record = part("recordProp")?;
    let voice = part("voiceProp")?;
    let users = part("usersProp")?;
    let metadata = part("metadataProp")?;
    let mut m = Map::new();
    let rows: [(&str, &Map<String, Value>, &str); 18] = [
        ("internal-meeting-id", meeting_prop, "intId"),
        ("external-meeting-id", meeting_prop, "extId"),
        ("name", meeting_prop, "name"),
        ("is-breakout", meeting_prop, "isBreakout"),
        ("parent-id", breakout, "parentId"),
        ("duration", duration, "duration"),
        ("create-time", duration, "createdTime"),
        ("create-date", duration, "createdDate"),
        ("moderator-pass", password, "moderatorPass"),
        ("viewer-pass", password, "viewerPass"),
        ("record", record, "record"),
        ("voice-conf", voice, "voiceConf"),
        ("dial-number", voice, "dialNumber"),
        ("max-users", users, "maxUsers"),
        ("metadata", metadata, "metadata"),
        ("audioBridge", meeting_prop, "audioBridge"),
        ("cameraBridge", meeting_prop, "cameraBridge"),
        ("screenShareBridge", meeting_prop, "screenShareBridge"),
    ];
    for (key, source, field) in rows {
        put(&mut m, key, source.get(field));
    }
    let mut attributes = Map::new();
    attributes.insert("meeting".into(), Value::Object(m));
    Ok(Some(Mapped {
        id: "meeting-created",
        attributes,
    }))
}

fn meeting_ended(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    Ok(Some(Mapped {
        id: "meeting-ended",
        attributes: attributes_with_meeting(msg, mappings),
    }))
}

fn user_joined(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    Ok(Some(user_event("user-joined", msg, mappings)))
}

fn user_left(msg: &Message, mappings: &Mappings) -> Result<Option<Mapped>, MapError> {
    Ok(Some(user_event("user-left", msg, mappings)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::decode::decode;

    const MID: &str = "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700";

    /// Runs fixture lines through decode, map and the mapping state, as the pipeline does.
    fn run(lines: &[&str]) -> Vec<Option<String>> {
        let mut mappings = Mappings::new(86_400_000, None);
        lines
            .iter()
            .map(|line| {
                let msg = decode(line).unwrap();
                let mapped = map(&msg, &mappings).unwrap()?;
                mappings.apply(mapped.id, &mapped.attributes, 1);
                Some(to_json(&mapped, 1))
            })
            .collect()
    }

    fn fixture(name: &str) -> Vec<String> {
        let p = format!(
            "{}/../shared/fixtures/bbb/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    /// The fixture's expected line with `ts` replaced by 1.
    fn expected(line: &str) -> String {
        let mut v: Value = serde_json::from_str(line).unwrap();
        v["data"]["event"]["ts"] = 1.into();
        v.to_string()
    }

    #[test]
    fn fixture_lines_of_the_four_first_events() {
        let raw = fixture("raw-events.json");
        let mapped = fixture("mapped-events.json");
        let lines: Vec<&str> = raw.iter().map(String::as_str).collect();
        let out = run(&lines);
        let mut checked = 0;
        for (i, got) in out.iter().enumerate() {
            let Some(got) = got else { continue };
            assert_eq!(got, &expected(&mapped[i]), "fixture line {}", i + 1);
            checked += 1;
        }
        // meeting-created, two joins, two lefts, meeting-ended
        assert_eq!(checked, 6);
    }

    #[test]
    fn meeting_created_without_props_is_an_error() {
        let msg = decode(r#"{"envelope":{"name":"MeetingCreatedEvtMsg"},"core":{"body":{"props":{"meetingProp":{}}}}}"#).unwrap();
        let err = map(&msg, &Mappings::new(1, None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "MeetingCreatedEvtMsg without breakoutProps"
        );
    }

    #[test]
    fn user_for_unknown_meeting_has_only_internal_id() {
        let msg = decode(&format!(r#"{{"envelope":{{"name":"UserLeftMeetingEvtMsg","routing":{{"meetingId":"{MID}"}}}},"core":{{"header":{{"userId":"u1"}},"body":{{"guest":"true"}}}}}}"#)).unwrap();
        let m = map(&msg, &Mappings::new(1, None)).unwrap().unwrap();
        assert_eq!(
            to_json(&m, 5),
            format!(
                r#"{{"data":{{"type":"event","id":"user-left","attributes":{{"meeting":{{"internal-meeting-id":"{MID}"}},"user":{{"internal-user-id":"u1","external-user-id":"","guest":true}}}},"event":{{"ts":5}}}}}}"#
            )
        );
    }

    #[test]
    fn unknown_messages_are_not_mapped() {
        let msg =
            decode(r#"{"envelope":{"name":"UserTalkingVoiceEvtMsg"},"core":{"body":{}}}"#).unwrap();
        assert!(map(&msg, &Mappings::new(1, None)).unwrap().is_none());
    }
}

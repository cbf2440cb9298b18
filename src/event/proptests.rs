//! Property tests: whatever JSON arrives on the bus, processing never panics, and every event it
//! yields is a processed event (`data.type` = `event`) with an id of the catalogue; and a message
//! of any catalogue kind whose required fields have the wrong type yields no event.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{
    catalogue::{MapError, OUTPUT_IDS, message_kinds},
    mapping::Mappings,
    process::{EventFilter, Processor, Skip},
};

/// Keys and strings the decoder and catalogue look for, so that generated messages reach deep.
const WORDS: &[&str] = &[
    "envelope",
    "core",
    "header",
    "body",
    "name",
    "routing",
    "meetingId",
    "userId",
    "data",
    "id",
    "attributes",
    "meeting",
    "internal-meeting-id",
    "user",
    "internal-user-id",
    "event",
    "ts",
    "payload",
    "meeting_id",
    "record_id",
    "external_meeting_id",
    "current_time",
    "props",
    "meetingProp",
    "intId",
    "extId",
    "recording",
    "muted",
    "listenOnly",
    "chatId",
    "msg",
    "poll",
    "pollId",
    "emoji",
    "reactionEmoji",
    "raiseHand",
    "guest",
    "metadata",
    "playback",
    "not-used",
    "MAIN-PUBLIC-GROUP-CHAT",
    "raiseHand",
    "MeetingCreatedEvtMsg",
    "MeetingDestroyedEvtMsg",
    "UserJoinedMeetingEvtMsg",
    "UserLeftMeetingEvtMsg",
    "UserMutedVoiceEvtMsg",
    "RecordingStatusChangedEvtMsg",
    "ScreenshareRtmpBroadcastStartedEvtMsg",
    "GroupChatMessageBroadcastEvtMsg",
    "PollStartedEvtMsg",
    "UserRespondedToPollRespMsg",
    "UserEmojiChangedEvtMsg",
    "PresenterAssignedEvtMsg",
    "publish_ended",
    "archive_ended",
    "published",
    "user-left",
    "meeting-ended",
    "m1",
    "u1",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(WORDS).prop_map(String::from),
        1 => ".{0,8}",
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_and_yields_only_catalogue_events(messages in prop::collection::vec(json(), 1..8)) {
        let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
        for m in messages {
            let text: Arc<str> = m.to_string().into();
            if let Ok(events) = p.process(&text, 1) {
                for e in events {
                    let v: Value = serde_json::from_str(e.processed.text()).expect("valid JSON");
                    prop_assert_eq!(&v["data"]["type"], "event");
                    let id = v["data"]["id"].as_str().expect("an id");
                    prop_assert!(OUTPUT_IDS.contains(&id), "{}", id);
                    prop_assert_eq!(id, e.id.as_str());
                }
            }
        }
    }
}

/// A well-formed message of kind `name` carrying everything any kind needs.
fn well_formed(name: &str) -> Value {
    let mut m = shared_parts(name);
    let body = &mut m["core"]["body"];
    match name {
        // The user whose role changes is the body's (the header's changed it).
        "UserRoleChangedEvtMsg" => {
            body["userId"] = "u2".into();
            body["role"] = "MODERATOR".into();
        }
        "BreakoutRoomStartedEvtMsg" => body["breakout"] = serde_json::json!({"breakoutId": "b1"}),
        "BreakoutRoomEndedEvtMsg" => body["breakoutId"] = "b1".into(),
        _ => {}
    }
    m
}

/// What every kind of the reference's catalogue needs.
fn shared_parts(name: &str) -> Value {
    serde_json::json!({
        "envelope": {"name": name, "routing": {"meetingId": "m1"}},
        "core": {
            "header": {"name": name, "meetingId": "m1", "userId": "u1"},
            "body": {
                "chatId": "MAIN-PUBLIC-GROUP-CHAT",
                "msg": {"id": "c1", "message": "hi", "sender": {"name": "n"}},
                "poll": {"id": "p1", "answers": []},
                "pollId": "p1",
                "props": {"meetingProp": {"intId": "m1", "extId": "e1"}, "breakoutProps": {},
                          "durationProps": {}, "password": {}, "recordProp": {}, "voiceProp": {},
                          "usersProp": {}, "metadataProp": {}},
            }
        }
    })
}

/// Any JSON value that is not a string (ids must be strings).
fn not_a_string() -> impl Strategy<Value = Value> {
    json().prop_filter("not a string or unset", |v| !v.is_string() && !v.is_null())
}

/// Any JSON value that is not an object (bodies must be objects).
fn not_an_object() -> impl Strategy<Value = Value> {
    json().prop_filter("not an object or unset", |v| !v.is_object() && !v.is_null())
}

fn kinds() -> impl Strategy<Value = (&'static str, bool)> {
    proptest::sample::select(message_kinds().collect::<Vec<_>>())
}

fn user_kinds() -> impl Strategy<Value = &'static str> {
    let names: Vec<&str> = message_kinds()
        .filter(|(_, user)| *user)
        .map(|(name, _)| name)
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    proptest::sample::select(names)
}

/// Processes one message: the events' ids, or why it was skipped.
fn outcome(message: &Value) -> Result<Vec<String>, Skip> {
    let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
    let text: Arc<str> = message.to_string().into();
    p.process(&text, 1)
        .map(|events| events.into_iter().map(|e| e.id.to_string()).collect())
}

fn is_wrong_type(r: &Result<Vec<String>, Skip>) -> bool {
    matches!(r, Err(Skip::Map(MapError::WrongType { .. })))
}

#[test]
fn every_kind_is_accepted_when_well_formed() {
    for (name, _) in message_kinds() {
        let got = outcome(&well_formed(name));
        assert!(
            matches!(&got, Ok(ids) if !ids.is_empty()),
            "{name}: {got:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn a_meeting_id_of_the_wrong_type_makes_no_event((name, _) in kinds(), bad in not_a_string()) {
        let mut m = well_formed(name);
        m["envelope"]["routing"]["meetingId"] = bad;
        let got = outcome(&m);
        prop_assert!(is_wrong_type(&got), "{}: {:?}", name, got);
    }

    #[test]
    fn a_body_of_the_wrong_type_makes_no_event((name, _) in kinds(), bad in not_an_object()) {
        let mut m = well_formed(name);
        m["core"]["body"] = bad;
        let got = outcome(&m);
        prop_assert!(is_wrong_type(&got), "{}: {:?}", name, got);
    }

    #[test]
    fn a_user_id_of_the_wrong_type_or_missing_makes_no_user_event(
        name in user_kinds(),
        bad in prop_oneof![not_a_string(), Just(Value::Null)],
    ) {
        let mut m = well_formed(name);
        m["core"]["header"]["userId"] = bad;
        let got = outcome(&m);
        prop_assert!(matches!(got, Err(Skip::Map(_))), "{}: {:?}", name, got);
    }

    #[test]
    fn nested_parts_of_the_wrong_type_make_no_event(
        (name, part) in proptest::sample::select(&[
            ("GroupChatMessageBroadcastEvtMsg", "msg"),
            ("PollStartedEvtMsg", "poll"),
            ("PollStartedEvtMsg", "pollId"),
            ("UserRespondedToPollRespMsg", "pollId"),
        ][..]),
        bad in json().prop_filter("neither a string, an object nor unset", |v| {
            !v.is_string() && !v.is_object() && !v.is_null()
        }),
    ) {
        let mut m = well_formed(name);
        m["core"]["body"][part] = bad;
        if part == "pollId" {
            // The poll's own id is the fallback: take it away too.
            m["core"]["body"]["poll"]["id"] = Value::Null;
        }
        let got = outcome(&m);
        prop_assert!(is_wrong_type(&got), "{}: {:?}", name, got);
    }
}

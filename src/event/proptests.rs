//! Property test: whatever JSON arrives on the bus, processing never panics, and every event it
//! yields is a processed event (`data.type` = `event`) with an id of the catalogue.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{
    catalogue::OUTPUT_IDS,
    mapping::Mappings,
    process::{EventFilter, Processor},
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
        let mut p = Processor::new(Mappings::new(86_400_000, None), EventFilter::default());
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

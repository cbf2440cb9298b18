//! Processing bus messages: the derived events (everyone leaves first, a raised hand from an
//! emoji), and the state that follows filtered events too.

use super::*;
use serde_json::json;

fn msg(name: &str, uid: &str, body: Value) -> Arc<str> {
    json!({
        "envelope": {"name": name, "routing": {"meetingId": "m"}},
        "core": {"header": {"name": name, "meetingId": "m", "userId": uid}, "body": body}
    })
    .to_string()
    .into()
}

fn created() -> Arc<str> {
    json!({"envelope": {"name": "MeetingCreatedEvtMsg"}, "core": {"body": {"props": {
        "meetingProp": {"intId": "m", "extId": "ext"}, "breakoutProps": {}, "durationProps": {},
        "password": {}, "recordProp": {}, "voiceProp": {}, "usersProp": {}, "metadataProp": {}}}}})
    .to_string()
    .into()
}

fn ended() -> Arc<str> {
    json!({"envelope": {"name": "MeetingDestroyedEvtMsg"}, "core": {"body": {"meetingId": "m"}}})
        .to_string()
        .into()
}

fn ids(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

fn processor() -> Processor {
    Processor::new(Mappings::new(86_400_000, false), EventFilter::default())
}

#[test]
fn meeting_end_makes_everyone_leave_first() {
    let mut p = processor();
    p.process(&created(), 1).unwrap();
    p.process(
        &msg(
            "UserJoinedMeetingEvtMsg",
            "a",
            json!({"extId": "xa", "name": "A"}),
        ),
        2,
    )
    .unwrap();
    p.process(
        &msg(
            "UserJoinedMeetingEvtMsg",
            "b",
            json!({"extId": "xb", "name": "B"}),
        ),
        3,
    )
    .unwrap();
    p.process(&msg("PresenterAssignedEvtMsg", "b", json!({})), 4)
        .unwrap();
    p.process(&msg("UserLeftMeetingEvtMsg", "a", json!({})), 5)
        .unwrap();
    let out = p.process(&ended(), 6).unwrap();
    assert_eq!(ids(&out), ["user-left", "meeting-ended"]);
    assert_eq!(
        out[0].processed.text(),
        r#"{"data":{"type":"event","id":"user-left","attributes":{"meeting":{"internal-meeting-id":"m","external-meeting-id":"ext"},"user":{"internal-user-id":"b","external-user-id":"xb","name":"B","guest":false,"presenter":true}},"event":{"ts":6}}}"#
    );
    assert!(out[0].raw.is_none(), "raw hooks get no synthesized event");
    assert_eq!(
        out[1].raw.as_ref().map(|r| r.text()),
        Some(&*ended()),
        "the bus message goes with its own event"
    );
    assert_eq!(p.mappings.user_count(), 0);
    // The meeting mapping is kept until it expires, for late recording events.
    assert_eq!(p.mappings.external_meeting("m"), Some("ext"));
}

#[test]
fn raise_hand_from_emoji() {
    let mut p = processor();
    p.process(&created(), 1).unwrap();
    p.process(
        &msg("UserJoinedMeetingEvtMsg", "a", json!({"extId": "xa"})),
        2,
    )
    .unwrap();
    let raw = msg("UserEmojiChangedEvtMsg", "a", json!({"emoji": "raiseHand"}));
    let out = p.process(&raw, 3).unwrap();
    assert_eq!(ids(&out), ["user-emoji-changed", "user-raise-hand-changed"]);
    assert_eq!(
        out[1].processed.text(),
        r#"{"data":{"type":"event","id":"user-raise-hand-changed","attributes":{"meeting":{"internal-meeting-id":"m","external-meeting-id":"ext"},"user":{"internal-user-id":"a","external-user-id":"xa","raise-hand":true}},"event":{"ts":3}}}"#
    );
    assert_eq!(out[0].raw.as_ref().map(|r| r.text()), Some(&*raw));
    assert!(
        out[1].raw.is_none(),
        "a raw hook gets the bus message once, with the emoji change"
    );
    let out = p
        .process(
            &msg("UserEmojiChangedEvtMsg", "a", json!({"emoji": "happy"})),
            4,
        )
        .unwrap();
    assert_eq!(ids(&out), ["user-emoji-changed", "user-raise-hand-changed"]);
    assert!(out[1].processed.text().contains(r#""raise-hand":false"#));
    let out = p
        .process(
            &msg("UserEmojiChangedEvtMsg", "a", json!({"emoji": "sad"})),
            5,
        )
        .unwrap();
    assert_eq!(ids(&out), ["user-emoji-changed"]);
}

#[test]
fn state_follows_events_even_when_filtered() {
    let filter = EventFilter {
        include: vec![],
        exclude: vec!["MEETING-CREATED".into(), "user-joined".into()],
        ..EventFilter::default()
    };
    let mut p = Processor::new(Mappings::new(86_400_000, false), filter);
    assert!(p.process(&created(), 1).unwrap().is_empty());
    assert!(
        p.process(
            &msg("UserJoinedMeetingEvtMsg", "a", json!({"extId": "xa"})),
            2
        )
        .unwrap()
        .is_empty()
    );
    let out = p
        .process(&msg("UserMutedVoiceEvtMsg", "a", json!({"muted": true})), 3)
        .unwrap();
    assert!(
        out[0]
            .processed
            .text()
            .contains(r#""external-meeting-id":"ext""#)
    );
    assert!(
        out[0]
            .processed
            .text()
            .contains(r#""external-user-id":"xa""#)
    );
    let only = EventFilter {
        include: vec!["user-left".into()],
        ..EventFilter::default()
    };
    assert!(only.allows("User-Left") && !only.allows("user-joined"));
}

#[test]
fn screenshare_tracking_feeds_the_stop_event() {
    let mut p = processor();
    p.process(&created(), 1).unwrap();
    p.process(
        &msg("UserJoinedMeetingEvtMsg", "a", json!({"extId": "xa"})),
        2,
    )
    .unwrap();
    p.process(
        &msg("UserJoinedMeetingEvtMsg", "b", json!({"extId": "xb"})),
        2,
    )
    .unwrap();
    p.process(&msg("PresenterAssignedEvtMsg", "b", json!({})), 3)
        .unwrap();
    let start = p
        .process(
            &msg(
                "ScreenshareRtmpBroadcastStartedEvtMsg",
                "not-used",
                json!({}),
            ),
            4,
        )
        .unwrap();
    assert!(
        start[0]
            .processed
            .text()
            .contains(r#""user":{"internal-user-id":"b","external-user-id":"xb"}"#)
    );
    p.process(&msg("PresenterUnassignedEvtMsg", "b", json!({})), 5)
        .unwrap();
    let stop = p
        .process(
            &msg(
                "ScreenshareRtmpBroadcastStoppedEvtMsg",
                "not-used",
                json!({}),
            ),
            6,
        )
        .unwrap();
    assert!(
        stop[0]
            .processed
            .text()
            .contains(r#""internal-user-id":"b""#)
    );
    // Nobody presents or shares any more: the reference drops the event, and so does hookrelay.
    assert!(matches!(
        p.process(
            &msg(
                "ScreenshareRtmpBroadcastStoppedEvtMsg",
                "not-used",
                json!({})
            ),
            7
        ),
        Err(Skip::Map(_))
    ));
}

#[test]
fn a_role_change_is_kept_for_the_users_later_events() {
    let mut p = processor();
    p.process(&created(), 1).unwrap();
    p.process(
        &msg(
            "UserJoinedMeetingEvtMsg",
            "a",
            json!({"extId": "xa", "name": "A", "role": "VIEWER"}),
        ),
        2,
    )
    .unwrap();
    let out = p
        .process(
            &msg(
                "UserRoleChangedEvtMsg",
                "mod",
                json!({"userId": "a", "role": "MODERATOR", "changedBy": "mod"}),
            ),
            3,
        )
        .unwrap();
    assert_eq!(ids(&out), ["user-role-changed"]);
    let left = p.process(&ended(), 4).unwrap();
    assert_eq!(ids(&left), ["user-left", "meeting-ended"]);
    let v: Value = serde_json::from_str(left[0].processed.text()).unwrap();
    assert_eq!(v["data"]["attributes"]["user"]["role"], "MODERATOR");
    assert_eq!(v["data"]["attributes"]["user"]["external-user-id"], "xa");
}

#[test]
fn events_beyond_the_reference_are_for_hooks_naming_them_unless_the_operator_says_all() {
    let role = msg(
        "UserRoleChangedEvtMsg",
        "mod",
        json!({"userId": "a", "role": "MODERATOR", "changedBy": "mod"}),
    );
    let joined = msg("UserJoinedMeetingEvtMsg", "a", json!({"extId": "xa"}));
    let mut p = processor();
    let marks = |p: &mut Processor, m: &Arc<str>| {
        p.process(m, 1)
            .unwrap()
            .iter()
            .map(|e| e.named_only)
            .collect::<Vec<_>>()
    };
    assert_eq!(marks(&mut p, &joined), [false]);
    assert_eq!(marks(&mut p, &role), [true]);
    let all = EventFilter {
        beyond_reference: true,
        ..EventFilter::default()
    };
    let mut p = Processor::new(Mappings::new(86_400_000, false), all);
    assert_eq!(marks(&mut p, &role), [false]);
}

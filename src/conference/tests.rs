//! A scripted meeting through the processor, checked against the numbers a scrape shows.

use serde_json::{Value, json};

use super::{exposition::Summary, *};
use crate::event::{EventFilter, Mappings, Processor};

fn akka(name: &str, mid: &str, uid: &str, body: Value) -> Arc<str> {
    json!({
        "envelope": {"name": name, "routing": {"meetingId": mid, "userId": uid}},
        "core": {"header": {"name": name, "meetingId": mid, "userId": uid}, "body": body}
    })
    .to_string()
    .into()
}

fn created(mid: &str, breakout: bool) -> Arc<str> {
    json!({
        "envelope": {"name": "MeetingCreatedEvtMsg", "routing": {"sender": "bbb-apps-akka"}},
        "core": {"header": {"name": "MeetingCreatedEvtMsg"}, "body": {"props": {
            "meetingProp": {"intId": mid, "extId": format!("ext-{mid}"), "isBreakout": breakout},
            "breakoutProps": {}, "durationProps": {}, "password": {}, "recordProp": {},
            "voiceProp": {}, "usersProp": {}, "metadataProp": {}}}}
    })
    .to_string()
    .into()
}

fn ended(mid: &str) -> Arc<str> {
    json!({"envelope": {"name": "MeetingDestroyedEvtMsg"},
           "core": {"header": {"name": "MeetingDestroyedEvtMsg"}, "body": {"meetingId": mid}}})
    .to_string()
    .into()
}

fn rap(step: &str, record: &str) -> Arc<str> {
    json!({"header": {"name": step}, "payload": {"meeting_id": record, "record_id": record}})
        .to_string()
        .into()
}

fn run(messages: &[Arc<str>]) -> (SharedConference, Summary) {
    let shared = SharedConference::default();
    let mut p = Processor::new(Mappings::new(u64::MAX, false), EventFilter::default())
        .with_observer(shared.clone());
    for m in messages {
        let _ = p.process(m, 1);
    }
    let summary = Summary::of(&shared.lock().unwrap());
    (shared, summary)
}

#[test]
fn a_scripted_meeting() {
    let joined = |uid: &str, client: &str| {
        akka(
            "UserJoinedMeetingEvtMsg",
            "m1",
            uid,
            json!({"intId": uid, "clientType": client}),
        )
    };
    let voice = |uid: &str, listen: bool| {
        akka(
            "UserJoinedVoiceConfToClientEvtMsg",
            "m1",
            uid,
            json!({"listenOnly": listen}),
        )
    };
    let (_, s) = run(&[
        created("m1", false),
        created("m1", false), // a repeat counts once
        joined("a", "HTML5"),
        joined("b", "HTML5"),
        joined("b", "HTML5"), // a repeated join counts once
        joined("c", "dial-in-user"),
        voice("a", false),
        voice("b", true),
        akka(
            "UserBroadcastCamStartedEvtMsg",
            "m1",
            "a",
            json!({"stream": "a_1"}),
        ),
        akka(
            "UserBroadcastCamStartedEvtMsg",
            "m1",
            "a",
            json!({"stream": "a_2"}),
        ),
        akka(
            "UserBroadcastCamStartedEvtMsg",
            "m1",
            "b",
            json!({"stream": "b_1"}),
        ),
        akka(
            "UserBroadcastCamStoppedEvtMsg",
            "m1",
            "a",
            json!({"stream": "a_2"}),
        ),
        akka("UserLeftMeetingEvtMsg", "m1", "zz", json!({})), // unknown: nothing
        akka("UserLeftMeetingEvtMsg", "m1", "b", json!({})),  // takes b's audio and camera
        created("br1", true),
        akka(
            "UserJoinedMeetingEvtMsg",
            "br1",
            "d",
            json!({"clientType": "HTML5"}),
        ),
        rap("archive_started", "r1"),
        rap("archive_started", "r2"),
        rap("post_publish_ended", "r2"),
        rap("published", "r3"),
        rap("unpublished", "r3"),
        rap("deleted", "r4"),
        rap("sanity_ended", "r5"),
        rap("process_started", "r5"),
        rap("process_started", "r6"),
        rap("process_ended", "r6"),
    ]);
    assert_eq!(s.meetings, 2);
    assert_eq!(s.breakout_rooms, 1);
    assert_eq!(s.participants, 3, "a, c in m1; d in the breakout room");
    assert_eq!(s.listeners, 0);
    assert_eq!(s.voice, 1);
    assert_eq!(s.video, 1);
    assert_eq!(
        s.clients,
        [
            ("html5".into(), 2),
            ("dial-in".into(), 1),
            ("flash".into(), 0)
        ]
    );
    let mut rooms = s.rooms.clone();
    rooms.sort();
    assert_eq!(rooms, [[1, 0, 0, 0], [2, 0, 1, 1]]);
    // r1 archived, not processed yet; r5 processing; r6 processed; r2 published; r3
    // unpublished; r4 deleted.
    assert_eq!(s.recordings, [1, 1, 1, 1, 1, 1]);
    assert_eq!((s.unique_meetings, s.unique_breakout_rooms), (1, 1));
}

#[test]
fn an_ended_meeting_leaves_nothing_and_changes_are_reported_once() {
    let (shared, s) = run(&[
        created("m1", false),
        akka("UserJoinedMeetingEvtMsg", "m1", "a", json!({})),
        ended("m1"),
    ]);
    assert_eq!((s.meetings, s.participants), (0, 0));
    assert_eq!(s.unique_meetings, 1, "a counter since start");
    let mut c = shared.lock().unwrap();
    assert_eq!(c.take_changes().rooms, [("m1".to_string(), None)]);
    assert_eq!(c.take_changes(), Changes::default());
}

#[test]
fn inactive_meetings_expire() {
    let (shared, _) = run(&[created("m1", false)]);
    let mut c = shared.lock().unwrap();
    assert_eq!(c.expire(1 + 1000, 1000), 0);
    assert_eq!(c.expire(1 + 1001, 1000), 1);
    assert!(c.rooms.is_empty());
}

#[test]
fn a_change_in_a_big_room_writes_that_user_only_and_members_round_trip() {
    let joined = |uid: &str| akka("UserJoinedMeetingEvtMsg", "m1", uid, json!({"intId": uid}));
    let mut messages = vec![created("m1", false)];
    messages.extend((0..50).map(|i| joined(&format!("u{i}"))));
    let (shared, _) = run(&messages);
    let mut c = shared.lock().unwrap();
    let first = c.take_changes();
    assert_eq!(first.rooms.len(), 1, "the new room is written whole once");
    assert_eq!(first.users.len(), 0, "its users come with it");
    drop(c);
    let mut p = Processor::new(Mappings::new(u64::MAX, false), EventFilter::default())
        .with_observer(shared.clone());
    let _ = p.process(&joined("u50"), 2);
    let _ = p.process(
        &akka(
            "UserBroadcastCamStartedEvtMsg",
            "m1",
            "u3",
            json!({"stream": "cam-3"}),
        ),
        2,
    );
    let mut c = shared.lock().unwrap();
    let mut changes = c.take_changes();
    changes.users.sort_by(|a, b| a.1.cmp(&b.1));
    assert!(changes.rooms.is_empty());
    let client = Some("html5".to_string());
    assert_eq!(
        changes.users,
        [
            (
                "m1".to_string(),
                "u3".to_string(),
                Some(Member {
                    client: client.clone(),
                    audio: None,
                    streams: vec!["cam-3".into()]
                })
            ),
            (
                "m1".to_string(),
                "u50".to_string(),
                Some(Member {
                    client,
                    ..Member::default()
                })
            ),
        ]
    );
    // What the member hash holds rebuilds the room exactly.
    let room = c.rooms["m1"].clone();
    let mut rebuilt = room.header();
    for (uid, m) in room.members() {
        rebuilt.add_member(&uid, m);
    }
    rebuilt.last_activity_ms = room.last_activity_ms;
    assert_eq!(rebuilt, room);
    assert_eq!(room.members().len(), 51);
}

#[test]
fn a_reconciliation_writes_only_what_differs_and_removes_what_bbb_no_longer_has() {
    let mut c = Conference::default();
    let room = |users: &[&str]| Room {
        users: users
            .iter()
            .map(|u| (u.to_string(), "html5".to_string()))
            .collect(),
        ..Room::default()
    };
    let rooms = |list: &[(&str, &[&str])]| -> HashMap<String, Room> {
        list.iter().map(|(m, u)| (m.to_string(), room(u))).collect()
    };
    c.seed(rooms(&[("m1", &["a"]), ("m2", &["b"])]), 1);
    assert_eq!(c.take_changes().rooms.len(), 2);
    // The same state again: nothing to write.
    c.seed(rooms(&[("m1", &["a"]), ("m2", &["b"])]), 2);
    assert_eq!(c.take_changes(), Changes::default());
    // m1 gained a user, m2 is gone (BBB crashed it): both written, m2 as a removal.
    c.seed(rooms(&[("m1", &["a", "c"])]), 3);
    let mut changed = c.take_changes().rooms;
    changed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(changed.len(), 2);
    assert_eq!(changed[0].0, "m1");
    assert_eq!(changed[0].1.as_ref().map(|r| r.users.len()), Some(2));
    assert_eq!(changed[1], ("m2".to_string(), None));
}

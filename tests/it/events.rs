//! Events end to end: exact processed JSON with a valid signature, raw passthrough byte for byte,
//! meeting-bound hooks and eventID filters.

use crate::support::{
    TestReceiver, TestRedis, TestRelay, fixture, meeting_created, meeting_ended, user_joined,
    without_ts,
};

/// Fixture lines of the four first events: created, joins, lefts, ended.
const LINES: [usize; 6] = [1, 2, 6, 22, 23, 24];

#[tokio::test]
async fn four_events_exact_json_and_signature() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/hook?token=abc");
    relay
        .create_hook(
            &url,
            "eventID=meeting-created,user-joined,user-left,meeting-ended",
        )
        .await;
    for line in 1..=24 {
        redis.publish(&fixture(line).0).await;
    }
    let got = rx.wait_delivered(LINES.len()).await;
    assert_eq!(got.len(), LINES.len(), "only the ids the hook asked for");
    let mut last_ts = 0;
    for (r, line) in got.iter().zip(LINES) {
        r.assert_signed(&url);
        assert_eq!(r.method, "POST");
        assert_eq!(
            r.headers["content-type"],
            "application/x-www-form-urlencoded"
        );
        assert_eq!(
            without_ts(&r.event()),
            without_ts(&fixture(line).1),
            "fixture line {line}"
        );
        let ts = r.timestamp();
        assert!(ts > last_ts, "timestamps strictly increase");
        last_ts = ts;
        // The body is exactly event=…&timestamp=….
        assert!(
            r.body.starts_with("event=%7B%22data%22")
                && r.body.ends_with(&format!("&timestamp={ts}"))
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn raw_hook_gets_the_bus_message_byte_for_byte() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/raw"), "getRaw=true").await;
    // Odd spacing and key order must survive untouched.
    let raw = format!(
        "  {}\n",
        meeting_created("int-1", "ext-1").replacen("{", "{ ", 1)
    );
    redis.publish(&raw).await;
    let got = rx.wait_delivered(1).await;
    assert_eq!(got[0].event(), raw);
    got[0].assert_signed(&rx.url("/raw"));
    relay.stop().await;
}

#[tokio::test]
async fn meeting_bound_hooks_and_event_filters() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let (all, m1, m1_joins, m2) = (
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
    );
    // Registered before the meetings exist.
    relay.create_hook(&all.url("/"), "").await;
    relay.create_hook(&m1.url("/"), "meetingID=ext-1").await;
    relay
        .create_hook(&m1_joins.url("/"), "meetingID=ext-1&eventID=USER-JOINED")
        .await;
    relay.create_hook(&m2.url("/"), "meetingID=ext-2").await;
    for msg in [
        meeting_created("int-1", "ext-1"),
        meeting_created("int-2", "ext-2"),
        user_joined("int-1", "u1", "Ann"),
        user_joined("int-2", "u2", "Bob"),
        meeting_ended("int-1"),
        // Markers: each hook's last callback. Anything that should not come would be queued
        // before them (one queue per hook, in bus order), so it would be seen.
        meeting_created("int-3", "ext-1"),
        user_joined("int-3", "mark", "M1"),
        user_joined("int-2", "mark", "M2"),
    ] {
        redis.publish(&msg).await;
    }
    let ids = |r: &TestReceiver| -> Vec<String> {
        r.delivered()
            .iter()
            .map(|d| {
                let v: serde_json::Value = serde_json::from_str(&d.event()).unwrap();
                format!(
                    "{}@{}",
                    v["data"]["id"].as_str().unwrap(),
                    v["data"]["attributes"]["meeting"]["external-meeting-id"]
                        .as_str()
                        .unwrap_or("?")
                )
            })
            .collect()
    };
    all.wait_delivered(9).await;
    m1.wait_delivered(6).await;
    m2.wait_delivered(3).await;
    m1_joins.wait_delivered(2).await;
    assert_eq!(
        ids(&m1),
        [
            "meeting-created@ext-1",
            "user-joined@ext-1",
            "user-left@ext-1",
            "meeting-ended@ext-1",
            "meeting-created@ext-1",
            "user-joined@ext-1"
        ]
    );
    assert_eq!(
        ids(&m2),
        [
            "meeting-created@ext-2",
            "user-joined@ext-2",
            "user-joined@ext-2"
        ]
    );
    assert_eq!(ids(&m1_joins), ["user-joined@ext-1", "user-joined@ext-1"]);
    assert_eq!(ids(&all).len(), 9);
    relay.stop().await;
}

#[tokio::test]
async fn a_raw_hook_gets_each_bus_message_once_and_nothing_synthesized() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let (raw, processed) = (TestReceiver::start().await, TestReceiver::start().await);
    relay.create_hook(&raw.url("/raw"), "getRaw=true").await;
    relay.create_hook(&processed.url("/p"), "").await;
    // An emoji change that also yields a raise-hand, and a meeting end that makes Ann leave.
    let emoji = serde_json::json!({
        "envelope": {"name": "UserEmojiChangedEvtMsg", "routing": {"meetingId": "int-1", "userId": "u1"}},
        "core": {"header": {"name": "UserEmojiChangedEvtMsg", "meetingId": "int-1", "userId": "u1"},
                 "body": {"userId": "u1", "emoji": "raiseHand"}}
    })
    .to_string();
    let messages = [
        meeting_created("int-1", "ext-1"),
        user_joined("int-1", "u1", "Ann"),
        emoji,
        meeting_ended("int-1"),
    ];
    for m in &messages {
        redis.publish(m).await;
    }
    let got: Vec<String> = processed
        .wait_delivered(6)
        .await
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.event()).unwrap();
            v["data"]["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        got,
        [
            "meeting-created",
            "user-joined",
            "user-emoji-changed",
            "user-raise-hand-changed",
            "user-left",
            "meeting-ended"
        ]
    );
    // The meeting's end is the raw hook's last callback: a repeat or a synthesized event
    // would come before it.
    let got: Vec<String> = raw
        .wait_delivered(4)
        .await
        .iter()
        .map(|r| r.event())
        .collect();
    assert_eq!(got, messages);
    relay.stop().await;
}

//! BBB 3.x's events beyond the reference's catalogue (`docs/events.md`), through the real
//! binary: to hooks naming them only, or to all with `[events] beyond_reference`; raw hooks
//! and plain hooks get nothing new; the reference 3.7's `rap-post-events-*` go to everyone;
//! user ids come from the stored mappings across a restart. Each message is the fixture of
//! `tests/fixtures/bbb-3x/`, moved to this test's meeting.

use serde_json::{Value, json};

use crate::support::{
    RelayProcess, TestReceiver, TestRedis, bbb3, meeting_created, meeting_ended,
    relay::{create_hook, http_client},
    schema::assert_meets_schema,
    user_joined,
};

const FIXTURE_MID: &str = "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700";
const NEW_IDS: &str = "meeting-ending,breakout-room-started,breakout-room-ended,user-role-changed,user-away-changed,timer-activated,timer-started,timer-stopped,timer-switched,timer-set,timer-reset,timer-ended,timer-deactivated";

/// Fixture `name` of tests/fixtures/bbb-3x, in meeting `int-1` with users `u1` (John) and `u2`
/// (Mary), its breakout room `room-1` (`room-ext`).
fn message(name: &str) -> String {
    bbb3::message(name)
        .to_string()
        .replace(FIXTURE_MID, "int-1")
        .replace("random-9019868", "ext-1")
        .replace("w_xfsb9gxtlfom", "u1")
        .replace("w_uxw0dzhtvk0l", "u2")
        .replace(
            "2b9f8c1d6e0a4f3b5c7d9e1f2a3b4c5d6e7f8a9b-1698771299000",
            "room-1",
        )
        .replace(
            "5f0e0b2a7c3c1f3a1d9b6c7e8f9a0b1c2d3e4f50-1698771299000",
            "room-ext",
        )
}

/// Publishes fixture `name` on the channel BBB publishes it on.
async fn publish(redis: &TestRedis, name: &str) {
    redis.publish_on(bbb3::channel(name), &message(name)).await;
}

fn meeting() -> Value {
    json!({"internal-meeting-id": "int-1", "external-meeting-id": "ext-1"})
}

fn user(uid: &str) -> Value {
    json!({"internal-user-id": uid, "external-user-id": format!("ext-{uid}")})
}

/// What each new message makes, in order (ids and attributes).
fn expected_new() -> Vec<(&'static str, Value)> {
    let with_user = |timer: Option<Value>| {
        let mut a = json!({"meeting": meeting(), "user": user("u1")});
        if let Some(t) = timer {
            a["timer"] = t;
        }
        a
    };
    vec![
        (
            "breakout-room-started",
            json!({"meeting": meeting(), "breakout": {"internal-meeting-id": "room-1", "external-meeting-id": "room-ext", "name": "ext-1 (Room 1)", "short-name": "Room 1", "sequence": 1, "is-default-name": true, "free-join": false, "capture-notes": false, "capture-slides": false}}),
        ),
        // The body's user (Mary), not the header's (John, who changed it).
        (
            "user-role-changed",
            json!({"meeting": meeting(), "user": {"internal-user-id": "u2", "external-user-id": "ext-u2", "role": "MODERATOR"}, "changed-by": user("u1")}),
        ),
        (
            "user-away-changed",
            json!({"meeting": meeting(), "user": {"internal-user-id": "u1", "external-user-id": "ext-u1", "away": true}}),
        ),
        (
            "timer-activated",
            with_user(Some(
                json!({"stopwatch": false, "running": false, "time": 300_000, "accumulated": 0, "track": "noTrack"}),
            )),
        ),
        ("timer-started", with_user(None)),
        (
            "timer-stopped",
            with_user(Some(json!({"accumulated": 60_000}))),
        ),
        (
            "timer-switched",
            with_user(Some(json!({"stopwatch": true}))),
        ),
        ("timer-set", with_user(Some(json!({"time": 600_000})))),
        ("timer-reset", with_user(None)),
        ("timer-ended", json!({"meeting": meeting()})),
        ("timer-deactivated", with_user(None)),
        (
            "breakout-room-ended",
            json!({"meeting": meeting(), "breakout": {"internal-meeting-id": "room-1", "external-meeting-id": "room-ext"}}),
        ),
        (
            "meeting-ending",
            json!({"meeting": meeting(), "reason": "ENDED_FROM_API"}),
        ),
    ]
}

/// The processed events a receiver got: (id, attributes), each checked against its schema and
/// its signature.
fn events(rx: &TestReceiver, url: &str) -> Vec<(String, Value)> {
    rx.delivered()
        .iter()
        .map(|r| {
            r.assert_signed(url);
            let v: Value = serde_json::from_str(&r.event()).expect("event JSON");
            assert_meets_schema(&v);
            let data = &v["data"];
            (
                data["id"].as_str().unwrap_or_default().to_string(),
                data["attributes"].clone(),
            )
        })
        .collect()
}

/// Runs the whole meeting against a relay started with `extra`: the ids each of the plain,
/// naming, meeting-bound and raw hooks got; restarts the relay halfway.
async fn run_meeting(extra: &str) -> [(TestReceiver, String); 4] {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, extra).await;
    let http = http_client();
    let plain = TestReceiver::start().await;
    let named = TestReceiver::start().await;
    let bound = TestReceiver::start().await;
    let raw = TestReceiver::start().await;
    let urls = [
        plain.url("/plain"),
        named.url("/named"),
        bound.url("/bound"),
        raw.url("/raw"),
    ];
    create_hook(&http, relay.api, &urls[0], "").await;
    create_hook(&http, relay.api, &urls[1], &format!("eventID={NEW_IDS}")).await;
    create_hook(
        &http,
        relay.api,
        &urls[2],
        "meetingID=ext-1&eventID=USER-ROLE-CHANGED,breakout-room-started,meeting-ended",
    )
    .await;
    create_hook(&http, relay.api, &urls[3], "getRaw=true").await;

    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&meeting_created("room-1", "room-ext")).await;
    redis.publish(&user_joined("int-1", "u1", "John")).await;
    redis.publish(&user_joined("int-1", "u2", "Mary")).await;
    // The breakout room's start, the role and away changes and the timer's first steps.
    for name in &bbb3::MESSAGES[..5] {
        publish(&redis, name).await;
    }
    // What was not sent yet waits in the store's queues for the next start.
    relay.terminate().await;
    let relay = RelayProcess::start(&redis, extra).await;
    // The timer's other steps, the room's end, the recording's post-events steps (as if the
    // meeting's recording were processed meanwhile) and why the meeting ends.
    let (end, rest) = bbb3::MESSAGES[5..].split_last().expect("messages");
    for name in rest.iter().chain(&bbb3::POST_EVENTS).chain([end]) {
        publish(&redis, name).await;
    }
    redis.publish(&meeting_ended("int-1")).await;
    // The meeting's end (user-left twice, meeting-ended) is the last each hook gets.
    crate::support::wait::until("every hook got the meeting's end", async || {
        let ended = |rx: &TestReceiver| {
            rx.delivered().last().is_some_and(|r| {
                r.event().contains("meeting-ended") || r.event().contains("MeetingDestroyedEvtMsg")
            })
        };
        let named_done = named.delivered_count() >= 13;
        if ended(&plain) && ended(&bound) && ended(&raw) && named_done {
            Ok(())
        } else {
            Err((
                plain.delivered_count(),
                named.delivered_count(),
                bound.delivered_count(),
                raw.delivered_count(),
            ))
        }
    })
    .await;
    relay.terminate().await;
    [
        (plain, urls[0].clone()),
        (named, urls[1].clone()),
        (bound, urls[2].clone()),
        (raw, urls[3].clone()),
    ]
}

/// The ids the reference's catalogue has for this meeting, in order, as a plain hook gets them.
const REFERENCE_IDS: &[&str] = &[
    "meeting-created",
    "meeting-created",
    "user-joined",
    "user-joined",
    "rap-post-events-started",
    "rap-post-events-ended",
    "user-left",
    "user-left",
    "meeting-ended",
];

#[tokio::test]
async fn new_events_go_to_hooks_naming_them_and_nothing_new_to_the_others() {
    let [
        (plain, plain_url),
        (named, named_url),
        (bound, bound_url),
        (raw, _),
    ] = run_meeting("").await;

    // A hook naming them gets each, in bus order, with exactly these attributes; across the
    // restart the users' external ids come from the stored mappings.
    let got = events(&named, &named_url);
    let want = expected_new();
    assert_eq!(
        got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        want.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
    for ((id, attributes), (_, expected)) in got.iter().zip(&want) {
        assert_eq!(attributes, expected, "{id}");
    }

    // A hook without eventID gets nothing new, and the reference 3.7's post-events steps.
    let got = events(&plain, &plain_url);
    assert_eq!(
        got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        REFERENCE_IDS
    );
    let post_ended = &got[5].1;
    assert_eq!(
        post_ended,
        &json!({"meeting": meeting(), "record-id": "int-1", "success": true, "step-time": 1211, "workflow": "post_events_analytics_callback"})
    );
    // The user who became moderator leaves as one.
    let mary_left = got
        .iter()
        .find(|(id, a)| id == "user-left" && a["user"]["internal-user-id"] == "u2");
    assert_eq!(mary_left.expect("Mary left").1["user"]["role"], "MODERATOR");

    // A meeting-bound hook gets the ones it names (eventID compared without case).
    let got = events(&bound, &bound_url);
    assert_eq!(
        got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        [
            "breakout-room-started",
            "user-role-changed",
            "meeting-ended"
        ]
    );

    // A raw hook gets the bus messages of the reference's events, unchanged, and none of the new.
    let names: Vec<String> = raw
        .delivered()
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(&r.event()).expect("raw JSON");
            v["envelope"]["name"]
                .as_str()
                .or(v["header"]["name"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "MeetingCreatedEvtMsg",
            "MeetingCreatedEvtMsg",
            "UserJoinedMeetingEvtMsg",
            "UserJoinedMeetingEvtMsg",
            "post_events_started",
            "post_events_ended",
            "MeetingDestroyedEvtMsg",
        ]
    );
    let post = raw.delivered()[4].event();
    assert_eq!(
        serde_json::from_str::<Value>(&post).unwrap(),
        serde_json::from_str::<Value>(&message("post_events_started")).unwrap(),
        "the bus message as it was"
    );
}

#[tokio::test]
async fn with_beyond_reference_every_hook_gets_them() {
    let [(plain, plain_url), (named, _), _, (raw, _)] =
        run_meeting("[events]\nbeyond_reference = true").await;
    let got = events(&plain, &plain_url);
    let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
    let mut want: Vec<&str> = vec![
        "meeting-created",
        "meeting-created",
        "user-joined",
        "user-joined",
    ];
    want.extend(expected_new().iter().map(|(id, _)| *id).take(12));
    want.extend([
        "rap-post-events-started",
        "rap-post-events-ended",
        "meeting-ending",
    ]);
    want.extend(["user-left", "user-left", "meeting-ended"]);
    assert_eq!(ids, want);
    for (id, attributes) in &got {
        if let Some((_, expected)) = expected_new().iter().find(|(i, _)| i == id) {
            assert_eq!(attributes, expected, "{id}");
        }
    }
    assert_eq!(named.delivered_count(), 13);
    // Raw hooks get the new bus messages too, as they are.
    assert_eq!(raw.delivered().len(), 7 + 13);
}

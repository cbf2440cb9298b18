//! The full catalogue through the real pipeline: the fixture replayed line for line, user
//! mappings across a restart, synthesized events, recording steps, global filters.

use serde_json::{Value, json};

use crate::support::{
    TestReceiver, TestRedis, TestRelay, fixture, meeting_created, meeting_ended, user_joined,
    without_ts,
};

/// Fixture lines where hookrelay deliberately differs from the reference's recorded output.
const DIFFERENCES: &[(usize, &str)] = &[
    (
        15,
        "chat-group-message-sent carries the sender's external-user-id (as reference 3.5.0 does; the file was recorded before)",
    ),
    (
        21,
        "poll-responded names the respondent (core.body.userId), not the poll owner of the header (reference bug 14)",
    ),
];

/// What hookrelay sends for a line of [`DIFFERENCES`], from the reference's line.
fn corrected(line: usize, mut v: Value) -> Value {
    let a = &mut v["data"]["attributes"];
    match line {
        15 => {
            a["chat-message"]["sender"] = json!({"internal-user-id": "w_xfsb9gxtlfom", "external-user-id": "w_xfsb9gxtlfom", "name": "John Doe", "time": 1698771232706u64});
        }
        21 => {
            a["user"] =
                json!({"internal-user-id": "w_uxw0dzhtvk0l", "external-user-id": "w_uxw0dzhtvk0l"})
        }
        _ => {}
    }
    v
}

#[tokio::test]
async fn fixture_replay_matches_line_for_line() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/all");
    relay.create_hook(&url, "").await;
    for line in 1..=24 {
        redis.publish(&fixture(line).0).await;
    }
    let got = rx.wait_delivered(24).await;
    assert_eq!(got.len(), 24);
    for (i, r) in got.iter().enumerate() {
        let line = i + 1;
        r.assert_signed(&url);
        crate::support::schema::assert_meets_schema(&serde_json::from_str(&r.event()).unwrap());
        let reference: Value = serde_json::from_str(&without_ts(&fixture(line).1)).unwrap();
        let expected = if DIFFERENCES.iter().any(|(l, _)| *l == line) {
            let c = corrected(line, reference.clone());
            assert_ne!(c, reference, "line {line} is listed as different");
            c
        } else {
            reference
        };
        // Byte-identical to the reference apart from ts: same keys, same order.
        assert_eq!(
            without_ts(&r.event()),
            expected.to_string(),
            "fixture line {line}"
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn user_mappings_survive_a_restart_and_feed_meeting_end() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/m"), "meetingID=ext-1").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    let mut joined = serde_json::from_str::<Value>(&user_joined("int-1", "u1", "Ann")).unwrap();
    joined["core"]["body"]["userdata"] = json!({"color": "blue"});
    redis.publish(&joined.to_string()).await;
    rx.wait_delivered(2).await;
    relay.stop().await;

    let relay = TestRelay::start(&redis).await;
    let muted = json!({
        "envelope": {"name": "UserMutedVoiceEvtMsg", "routing": {"meetingId": "int-1", "userId": "u1"}},
        "core": {"header": {"name": "UserMutedVoiceEvtMsg", "meetingId": "int-1", "userId": "u1"}, "body": {"muted": true}}
    });
    redis.publish(&muted.to_string()).await;
    redis.publish(&meeting_ended("int-1")).await;
    let got = rx.wait_delivered(5).await;
    let ev = |i: usize| serde_json::from_str::<Value>(&got[i].event()).unwrap()["data"].clone();
    assert_eq!(ev(2)["id"], "user-audio-muted");
    assert_eq!(
        ev(2)["attributes"]["user"]["external-user-id"],
        "ext-u1",
        "from the restored mapping"
    );
    assert_eq!(ev(3)["id"], "user-left", "synthesized before meeting-ended");
    // The stored user comes back typed, not as strings.
    assert_eq!(
        ev(3)["attributes"]["user"],
        json!({"internal-user-id": "u1", "external-user-id": "ext-u1", "name": "Ann", "role": "VIEWER", "presenter": false, "userdata": {"color": "blue"}, "guest": false})
    );
    assert_eq!(ev(4)["id"], "meeting-ended");
    assert!(
        redis
            .smembers("bigbluebutton:webhooks:proc:userMaps")
            .await
            .is_empty(),
        "users dropped at meeting end"
    );
    relay.stop().await;
}

#[tokio::test]
async fn recording_steps_reach_meeting_hooks_with_millisecond_ts() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay
        .create_hook(
            &rx.url("/m"),
            "meetingID=ext-1&eventID=rap-publish-ended,rap-published",
        )
        .await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&meeting_ended("int-1")).await;
    let step = json!({"header": {"timestamp": 1, "name": "publish_ended", "current_time": 1_700_000_000, "version": "0.0.1"},
        "payload": {"meeting_id": "int-1", "record_id": "int-1", "workflow": "presentation", "success": true, "step_time": 5,
                    "metadata": {"meetingName": "M", "isBreakout": "false"}, "playback": {"size": 1}, "download": null}});
    redis
        .publish_on("bigbluebutton:from-rap", &step.to_string())
        .await;
    // bbb-web's message after the meeting ended still carries the external id (mapping kept).
    let web = json!({"envelope": {"name": "PublishedRecordingSysMsg", "routing": {"sender": "bbb-web"}},
        "core": {"header": {"name": "PublishedRecordingSysMsg"}, "body": {"recordId": "int-1"}}});
    redis
        .publish_on("from-bbb-web-redis-channel", &web.to_string())
        .await;
    let got = rx.wait_delivered(2).await;
    let a: Value = serde_json::from_str(&got[0].event()).unwrap();
    assert_eq!(a["data"]["id"], "rap-publish-ended");
    assert_eq!(a["data"]["event"]["ts"], 1_700_000_000_000u64);
    assert_eq!(
        a["data"]["attributes"]["meeting"]["external-meeting-id"],
        "ext-1"
    );
    let b: Value = serde_json::from_str(&got[1].event()).unwrap();
    assert_eq!(
        b["data"]["attributes"],
        json!({"meeting": {"internal-meeting-id": "int-1", "external-meeting-id": "ext-1"}, "record-id": "int-1"})
    );
    relay.stop().await;
}

#[tokio::test]
async fn include_and_exclude_filters() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.exclude_events = vec!["meeting-created".into()];
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    // A marker: had the meeting-created come, it would be before it.
    redis.publish(&user_joined("int-1", "u2", "Mark")).await;
    let got = rx.wait_delivered(2).await;
    assert!(got[1].event().contains(r#""name":"Mark""#));
    // Filtered out, but the mapping was still made.
    assert!(got[0].event().contains(r#""id":"user-joined""#));
    assert!(got[0].event().contains(r#""external-meeting-id":"ext-1""#));
    relay.stop().await;
}

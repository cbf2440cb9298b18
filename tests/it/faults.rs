//! Faults: garbage on the bus, Redis killed and restarted under the running relay.

use crate::support::{TestReceiver, TestRedis, TestRelay, meeting_created, user_joined};

#[tokio::test]
async fn garbage_on_the_bus_is_skipped_without_harm() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    let huge = format!(
        r#"{{"envelope":{{"name":"UserJoinedMeetingEvtMsg"}},"pad":"{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let garbage = [
        "",
        "not json",
        "{}",
        "[]",
        "42",
        "\"text\"",
        "null",
        r#"{"envelope":{"name":17},"core":[]}"#,
        r#"{"envelope":{"name":"MeetingCreatedEvtMsg"},"core":{"body":{"props":"wrong"}}}"#,
        r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg"},"core":{"header":7,"body":[1,2]}}"#,
        r#"{"envelope":{"name":"UserTalkingVoiceEvtMsg"},"core":{"body":{}}}"#,
        // The review's example: a meeting id that is a number, a body that is an array.
        r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg","routing":{"meetingId":5}},"core":{"body":[]}}"#,
        r#"{"envelope":{"name":"UserJoinedMeetingEvtMsg","routing":{"meetingId":5}},"core":{"body":{}}}"#,
        r#"{"envelope":{"name":"UserLeftMeetingEvtMsg","routing":{"meetingId":"m"}},"core":{"header":{},"body":{}}}"#,
        huge.as_str(),
    ];
    for g in garbage {
        redis.publish(g).await;
    }
    redis
        .publish_on(
            "from-akka-apps-redis-channel",
            &meeting_created("int-1", "ext-1"),
        )
        .await;
    // The meeting-created is the marker: anything made of the garbage would be before it.
    let got = rx.wait_delivered(1).await;
    let ids: Vec<String> = got
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(&r.event()).unwrap()["data"]["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ids,
        ["meeting-created"],
        "no event from a malformed message"
    );
    let m = relay.metrics().await;
    for line in [
        r#"hookrelay_bus_skipped_total{source="default",reason="not_json"} 2"#,
        r#"hookrelay_bus_skipped_total{source="default",reason="empty"} 1"#,
        r#"hookrelay_bus_skipped_total{source="default",reason="not_object"} 4"#,
        r#"hookrelay_bus_skipped_total{source="default",reason="no_name"} 1"#,
        // props not an object (no meeting id in it), the user-left without a user id
        r#"hookrelay_bus_skipped_total{source="default",reason="missing_field"} 2"#,
        // the join with an array body, the example twice
        r#"hookrelay_bus_skipped_total{source="default",reason="wrong_type"} 3"#,
        r#"hookrelay_bus_skipped_total{source="default",reason="unmapped"} 1"#,
        r#"hookrelay_bus_skipped_total{source="default",reason="oversized"} 1"#,
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    relay.stop().await;
}

#[tokio::test]
async fn redis_killed_and_restarted_while_running() {
    let mut redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined("int-1", "u1", "before")).await;
    rx.wait_delivered(1).await;

    redis.kill().await;
    // While the store is down the API answers a clear FAILED, quickly.
    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fdown")
        .await;
    assert_eq!(
        xml,
        "<response><returncode>FAILED</returncode><messageKey>createHookError</messageKey><message>An error happened while creating your hook. Check the logs.</message></response>"
    );

    let xml = relay.call("destroy", "hookID=1").await;
    assert_eq!(
        xml,
        "<response><returncode>FAILED</returncode><messageKey>destroyHookError</messageKey><message>An error happened while removing your hook. Check the logs.</message></response>"
    );

    redis.restart().await;
    redis.wait_for_subscriber().await;
    redis.publish(&user_joined("int-1", "u2", "after")).await;
    let got = rx.wait_delivered(2).await;
    assert!(got[1].event().contains(r#""name":"after""#));
    assert!(
        relay
            .metrics()
            .await
            .contains(r#"hookrelay_bus_reconnects_total{source="default"} 1"#)
    );
    // The store works again.
    assert!(
        relay
            .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fup")
            .await
            .contains("SUCCESS")
    );
    relay.stop().await;
}

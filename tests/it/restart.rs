//! Hooks, their bindings and the meeting mappings survive a relay restart.

use crate::support::{TestReceiver, TestRedis, TestRelay, meeting_created, user_joined};

#[tokio::test]
async fn hooks_and_mappings_survive_a_restart() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    let bound = relay
        .create_hook(&rx.url("/bound"), "meetingID=ext-1&eventID=user-joined")
        .await;
    let raw = relay.create_hook(&rx.url("/raw"), "getRaw=true").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    rx.wait_delivered(1).await; // the raw hook got meeting-created
    let before = relay.call("list", "").await;
    relay.stop().await;

    let relay = TestRelay::start(&redis).await;
    assert_eq!(
        relay.call("list", "").await,
        before,
        "same hooks, same bindings"
    );
    // The mapping int-1 -> ext-1 came back from Redis: the bound hook gets the join.
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = rx.wait_delivered(3).await;
    let to_bound: Vec<_> = got.iter().filter(|r| r.uri.starts_with("/bound")).collect();
    assert_eq!(to_bound.len(), 1);
    assert!(
        to_bound[0]
            .event()
            .contains(r#""external-meeting-id":"ext-1""#)
    );
    // New ids continue after the restored ones.
    let next = relay.create_hook(&rx.url("/new"), "").await;
    assert!(next > bound.max(raw), "{next} after {bound}, {raw}");
    relay.stop().await;
}

#[tokio::test]
async fn hooks_of_the_reference_service_are_imported() {
    let redis = TestRedis::start().await;
    // As bbb-webhooks 3.x stores them: UUID ids, eventID as JSON array text.
    let mut c = redis.conn().await.unwrap();
    let rx = TestReceiver::start().await;
    let uuid = "0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10";
    let () = redis::pipe()
        .hset_multiple(
            format!("bigbluebutton:webhooks:out:hook:{uuid}"),
            &[
                ("id", uuid),
                ("callbackURL", rx.url("/v3").as_str()),
                ("externalMeetingID", "ext-1"),
                ("eventID", r#"["user-joined"]"#),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .ignore()
        .sadd("bigbluebutton:webhooks:out:hooks", uuid)
        .ignore()
        .query_async(&mut c)
        .await
        .unwrap();
    let relay = TestRelay::start(&redis).await;
    let list = relay.call("list", "").await;
    assert_eq!(
        list,
        format!(
            "<response><returncode>SUCCESS</returncode><hooks><hook><hookID>1</hookID><callbackURL><![CDATA[{}]]></callbackURL><meetingID><![CDATA[ext-1]]></meetingID><eventID>user-joined</eventID><permanentHook>false</permanentHook><rawData>false</rawData></hook></hooks></response>",
            rx.url("/v3")
        )
    );
    assert_eq!(
        redis.smembers("bigbluebutton:webhooks:out:hooks").await,
        ["1"]
    );
    assert!(
        redis
            .hgetall(&format!("bigbluebutton:webhooks:out:hook:{uuid}"))
            .await
            .is_empty()
    );
    // And it works: bound to its meeting, filtered to joins.
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = rx.wait_delivered(1).await;
    assert!(got[0].event().contains(r#""id":"user-joined""#));
    relay.stop().await;
}

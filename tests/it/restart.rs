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

//! The store behind Redis Sentinel: a master, its replica and a sentinel (all `redis-server`
//! processes started by the test), the bus on a Redis of its own. The master is killed with
//! SIGKILL; the sentinel promotes the replica, and the relay follows it without losing an
//! event, including those published while there was no master.

use std::time::{Duration, Instant};

use hookrelay::config::SecretUrl;

use crate::support::{
    TestReceiver, TestRedis, TestRelay,
    sentinel::{MASTER, TestSentinel, in_sync},
    user_joined, user_name,
};

async fn names(rx: &TestReceiver, n: usize) -> Vec<String> {
    rx.wait_delivered(n)
        .await
        .iter()
        .map(|r| user_name(&r.event()))
        .collect()
}

#[tokio::test]
async fn the_relay_follows_a_sentinel_failover_and_loses_nothing() {
    let bus = TestRedis::start().await;
    let mut master = TestRedis::start().await;
    let replica = TestRedis::start_replica_of(&master).await;
    in_sync(&replica).await;
    let sentinel = TestSentinel::start(&master).await;
    let rx = TestReceiver::start().await;

    let mut config = TestRelay::config(&bus);
    config.store.sentinels = vec![SecretUrl::new(format!(
        "redis://127.0.0.1:{}",
        sentinel.port
    ))];
    config.store.sentinel_master = MASTER.into();
    let relay = TestRelay::start_with(&bus, config).await;
    let hook = relay.create_hook(&rx.url("/s"), "").await;
    let key = format!("bigbluebutton:webhooks:out:hook:{hook}");
    assert!(
        !master.hgetall(&key).await.is_empty(),
        "stored in the master"
    );
    assert!(
        bus.smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .is_empty(),
        "the store is not the bus"
    );
    for i in 0..3 {
        bus.publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    assert_eq!(names(&rx, 3).await, ["n0", "n1", "n2"]);
    // The hook has reached the replica before its master dies.
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica
        .smembers("bigbluebutton:webhooks:out:hooks")
        .await
        .is_empty()
    {
        assert!(Instant::now() < deadline, "never replicated");
        // The loop's pace: it polls the replica until the hook is there.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    master.kill().await;
    // Published while there is no master: held until the store is back.
    for i in 3..30 {
        bus.publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    sentinel.wait_master(replica.port).await;
    for i in 30..60 {
        bus.publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    let want: Vec<String> = (0..60).map(|i| format!("n{i}")).collect();
    assert_eq!(names(&rx, 60).await, want, "every event once, in order");

    // The API writes to the new master.
    let second = relay.create_hook(&rx.url("/t"), "").await;
    assert!(second > hook);
    let stored = replica
        .hgetall(&format!("bigbluebutton:webhooks:out:hook:{second}"))
        .await;
    assert_eq!(stored.get("callbackURL"), Some(&rx.url("/t")));
    relay.stop().await;
}

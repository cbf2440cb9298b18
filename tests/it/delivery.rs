//! Delivery: order, retries with the same body and timestamp, failures that are not followed,
//! removal after the schedule, isolation of slow hooks, the reference body form, permanent hooks.

use std::time::Duration;

use hookrelay::config::{Compat, PermanentHook};

use crate::support::{
    Reply, TestReceiver, TestRedis, TestRelay, meeting_created, user_joined, user_name,
    wait::until_within,
};

#[tokio::test]
async fn a_thousand_events_arrive_in_bus_order() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish_users(0..1000).await;
    let got = rx.wait_delivered(1000).await;
    let names: Vec<String> = got.iter().map(|r| user_name(&r.event())).collect();
    let expected: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
    assert_eq!(names, expected);
    let ts: Vec<u64> = got.iter().map(|r| r.timestamp()).collect();
    assert!(
        ts.windows(2).all(|w| w[0] < w[1]),
        "timestamps strictly increase"
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_retried_event_keeps_body_and_timestamp_and_holds_back_later_ones() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    rx.script([Reply::Status(500), Reply::Status(503)]);
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined("int-1", "u1", "first")).await;
    redis.publish(&user_joined("int-1", "u2", "second")).await;
    rx.wait_delivered(2).await;
    let all = rx.received();
    assert_eq!(
        all.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 503, 200, 200]
    );
    assert_eq!(all[0].body, all[1].body);
    assert_eq!(all[0].body, all[2].body);
    assert_eq!(all[0].uri, all[2].uri, "same signature on every attempt");
    assert_eq!(user_name(&all[2].event()), "first");
    assert_eq!(user_name(&all[3].event()), "second");
    assert!(all[3].timestamp() > all[2].timestamp());
    relay.stop().await;
}

#[tokio::test]
async fn redirects_and_401_are_failures_and_not_followed() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    let elsewhere = TestReceiver::start().await;
    rx.script([Reply::Redirect(elsewhere.url("/moved")), Reply::Status(401)]);
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined("int-1", "u1", "x")).await;
    rx.wait_delivered(1).await;
    assert_eq!(
        rx.received().iter().map(|r| r.status).collect::<Vec<_>>(),
        [302, 401, 200]
    );
    assert!(
        elsewhere.received().is_empty(),
        "the redirect was not followed"
    );
    let m = relay.metrics().await;
    assert!(
        m.contains(r#"hookrelay_callback_failures_total{tenant="",reason="302"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"hookrelay_callback_failures_total{tenant="",reason="401"} 1"#),
        "{m}"
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_hook_is_removed_when_the_schedule_runs_out() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Status(500));
    let id = relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined("int-1", "u1", "x")).await;
    redis.publish(&user_joined("int-1", "u2", "y")).await;
    let listed = until_within("the hook removed", Duration::from_secs(4), async || {
        let listed = relay.call("list", "").await;
        match listed.contains("<hook>") {
            false => Ok(listed),
            true => Err(listed),
        }
    })
    .await;
    assert_eq!(
        listed,
        "<response><returncode>SUCCESS</returncode><hooks></hooks></response>"
    );
    // One attempt plus one per interval (three), all for the first event; the second is dropped.
    assert_eq!(rx.received().len(), 4);
    assert!(rx.received().iter().all(|r| user_name(&r.event()) == "x"));
    assert!(
        redis
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .is_empty()
    );
    assert!(
        redis
            .hgetall(&format!("bigbluebutton:webhooks:out:hook:{id}"))
            .await
            .is_empty()
    );
    // And it gets nothing more.
    redis.publish(&user_joined("int-1", "u3", "z")).await;
    // Proves that nothing happens: the removed hook gets no callback of the new event.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.received().len(), 4);
    assert!(
        relay
            .metrics()
            .await
            .contains(r#"hookrelay_hooks_removed_total{tenant="",reason="failures"} 1"#)
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_slow_hook_does_not_delay_a_fast_one() {
    let redis = TestRedis::start().await;
    // The slow receiver takes 3 s a callback, well within the request timeout: on a loaded
    // machine too, none of its callbacks times out and the fast hook's 50 take less than its 5.
    let mut config = TestRelay::config(&redis);
    config.delivery.request_timeout_ms = 10_000;
    let relay = TestRelay::start_with(&redis, config).await;
    let (slow, fast) = (TestReceiver::start().await, TestReceiver::start().await);
    slow.set_default(Reply::Delay(Duration::from_millis(3000), 200));
    relay.create_hook(&slow.url("/"), "").await;
    relay.create_hook(&fast.url("/"), "").await;
    let messages: Vec<String> = (0..50)
        .map(|i| user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
        .collect();
    redis.publish_all(&messages).await;
    fast.wait_delivered(50).await;
    // The slow hook is still on its first few events: one in flight at a time, in order.
    let slow_got = slow.received();
    assert!(slow_got.len() < 5, "slow hook got {}", slow_got.len());
    assert!(
        slow_got
            .iter()
            .enumerate()
            .all(|(i, r)| user_name(&r.event()) == format!("n{i}"))
    );
    relay.stop().await;
}

#[tokio::test]
async fn reference_compat_body() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.compat = Some(Compat::Reference);
    config.bbb.server_domain = "bbb.example".into();
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/cb"), "").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    let got = rx.wait_delivered(1).await;
    let r = &got[0];
    assert!(
        r.body
            .starts_with("domain=bbb.example&event=%5B%7B%22data%22"),
        "{}",
        r.body
    );
    let event = r.event();
    assert!(event.starts_with('[') && event.ends_with(']'));
    serde_json::from_str::<Vec<serde_json::Value>>(&event).unwrap();
    r.assert_signed(&rx.url("/cb"));
    relay.stop().await;
}

#[tokio::test]
async fn permanent_hooks_are_kept_and_retried_past_the_schedule() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.retry_intervals_ms = vec![10, 10];
    config.delivery.permanent_hooks = vec![PermanentHook {
        url: rx.url("/perm"),
        get_raw: false,
    }];
    let relay = TestRelay::start_with(&redis, config.clone()).await;
    let list = relay.call("list", "").await;
    assert!(
        list.contains("<permanentHook>true</permanentHook>"),
        "{list}"
    );
    let id: u64 = list
        .split("<hookID>")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        relay
            .call("destroy", &format!("hookID={id}"))
            .await
            .contains("destroyMissingHook")
    );
    rx.script((0..6).map(|_| Reply::Status(500)));
    redis.publish(&user_joined("int-1", "u1", "x")).await;
    rx.wait_delivered(1).await;
    assert_eq!(
        rx.received().len(),
        7,
        "six failures, more than the schedule, then success"
    );
    relay.stop().await;

    // Taken out of the configuration: removed at the next start.
    config.delivery.permanent_hooks.clear();
    let relay = TestRelay::start_with(&redis, config).await;
    assert_eq!(
        relay.call("list", "").await,
        "<response><returncode>SUCCESS</returncode><hooks></hooks></response>"
    );
    relay.stop().await;
}

#[tokio::test]
async fn bearer_mode_sends_the_secret_as_a_token_and_no_checksum() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.auth = hookrelay::config::CallbackAuth::Bearer;
    // The test receiver speaks plain http.
    config.delivery.allow_insecure_bearer = true;
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/b?x=1"), "").await;
    redis.publish(&user_joined("int-1", "u1", "x")).await;
    let got = rx.wait_delivered(1).await;
    assert_eq!(got[0].uri, "/b?x=1");
    assert_eq!(
        got[0].headers["authorization"],
        format!("Bearer {}", crate::support::SECRET)
    );
    relay.stop().await;
}

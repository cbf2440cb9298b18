//! Hostile and broken peers: the SSRF guard, receivers that hang, reset, trickle or flood, and a
//! thousand hooks of which half fail.

use std::{sync::atomic::Ordering, time::Duration};

use crate::support::{
    TestReceiver, TestRedis, TestRelay,
    bad_receiver::{BadReceiver, Misbehaviour},
    user_joined, user_name,
};

fn listed_hooks(xml: &str) -> usize {
    xml.matches("<hook>").count()
}

async fn wait_hook_count(relay: &TestRelay, n: usize) {
    for _ in 0..1000 {
        if listed_hooks(&relay.call("list", "").await) == n {
            return;
        }
        // The loop's pace: it polls the hook list until it has `n` hooks.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never {n} hooks: {}", relay.call("list", "").await);
}

#[tokio::test]
async fn ssrf_guard_refuses_internal_addresses() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.ssrf.allow_cidrs.clear();
    let relay = TestRelay::start_with(&redis, config).await;
    for url in [
        rx.url("/literal"),
        "http://10.0.0.8/x".to_string(),
        "http://169.254.169.254/latest/meta-data".to_string(),
        "http://[::ffff:127.0.0.1]/x".to_string(),
        "http://[fd00::1]/x".to_string(),
    ] {
        let xml = relay
            .call(
                "create",
                &format!("callbackURL={}", hookrelay::base::form::form_encode(&url)),
            )
            .await;
        assert!(
            xml.contains(
                "<messageKey>invalidCallbackURL</messageKey><message>callbackURL is not allowed"
            ),
            "{url}: {xml}"
        );
    }
    // A name is checked when it is resolved: localhost resolves to loopback only.
    let by_name = format!("http://localhost:{}/by-name", rx.addr.port());
    relay.create_hook(&by_name, "").await;
    redis.publish(&user_joined("int-1", "u1", "x")).await;
    wait_hook_count(&relay, 0).await;
    assert!(
        rx.received().is_empty(),
        "nothing reached the internal receiver"
    );
    assert!(
        relay
            .metrics()
            .await
            .contains(r#"hookrelay_callback_failures_total{tenant="",reason="blocked"} 4"#)
    );
    relay.stop().await;
}

#[tokio::test]
async fn broken_receivers_are_contained() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let good = TestReceiver::start().await;
    let hang = BadReceiver::start(Misbehaviour::Hang).await;
    let reset = BadReceiver::start(Misbehaviour::Reset).await;
    let trickle = BadReceiver::start(Misbehaviour::Trickle).await;
    let huge = BadReceiver::start(Misbehaviour::Huge).await;
    for bad in [&hang, &reset, &trickle, &huge] {
        relay.create_hook(&bad.url(), "").await;
    }
    relay.create_hook(&good.url("/good"), "").await;
    for i in 0..3 {
        redis
            .publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    // The good hook is served at once, whatever the others do.
    good.wait_delivered(3).await;
    // Hang, reset and trickle fail every attempt (one plus three retries) and are removed; the
    // endless body is a 2xx: read a little, then the connection is dropped.
    wait_hook_count(&relay, 2).await;
    for bad in [&hang, &reset, &trickle] {
        assert_eq!(bad.connections.load(Ordering::SeqCst), 4);
    }
    let m = relay.metrics().await;
    assert!(
        m.contains(r#"hookrelay_callback_failures_total{tenant="",reason="timeout"} 8"#),
        "{m}"
    );
    assert!(
        m.contains(r#"hookrelay_callbacks_delivered_total{tenant=""} 6"#),
        "{m}"
    );
    let flooded = huge.written.load(Ordering::SeqCst);
    assert!(
        flooded < 64 * 1024 * 1024,
        "the relay stopped reading the endless body ({flooded} bytes)"
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_thousand_hooks_half_failing() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    rx.status_for_prefix("/fail/", 500);
    for i in 0..1000 {
        let path = if i % 2 == 0 {
            format!("/ok/{i}")
        } else {
            format!("/fail/{i}")
        };
        relay.create_hook(&rx.url(&path), "").await;
    }
    for i in 0..5 {
        redis
            .publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    rx.wait_delivered(500 * 5).await;
    wait_hook_count(&relay, 500).await;
    let delivered = rx.delivered();
    for i in (0..1000).step_by(2) {
        let path = format!("/ok/{i}?");
        let names: Vec<String> = delivered
            .iter()
            .filter(|r| r.uri.starts_with(&path))
            .map(|r| user_name(&r.event()))
            .collect();
        assert_eq!(names, ["n0", "n1", "n2", "n3", "n4"], "hook {i}");
    }
    let xml = relay.call("list", "").await;
    assert!(!xml.contains("/fail/"), "every failing hook was removed");
    relay.stop().await;
}

//! The relay's own metrics: access control on the metrics listener, and the series about hooks,
//! callbacks, queues and the bus connection.

use crate::support::{
    TestReceiver, TestRedis, TestRelay, meeting_created, metric_value, relay::http_client,
    user_joined,
};

#[tokio::test]
async fn metrics_need_the_configured_credentials() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.metrics.auth.bearer_token = hookrelay::config::Secret::new("s3cret-token");
    config.metrics.auth.basic_user = "prom".into();
    config.metrics.auth.basic_password = hookrelay::config::Secret::new("pa55");
    let relay = TestRelay::start_with(&redis, config).await;
    let http = http_client();
    let url = format!("http://{}/metrics", relay.metrics);
    let refused = http.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        "Bearer realm=\"hookrelay\", Basic realm=\"hookrelay\""
    );
    for wrong in [
        "Bearer s3cret-toke",
        "Bearer s3cret-token2",
        "Basic cHJvbTpwYTU2",
    ] {
        let r = http
            .get(&url)
            .header("authorization", wrong)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{wrong}");
    }
    let bearer = http
        .get(&url)
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
    assert!(
        bearer
            .text()
            .await
            .unwrap()
            .contains("hookrelay_bus_messages_total")
    );
    let basic = http
        .get(&url)
        .basic_auth("prom", Some("pa55"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 200);
    relay.stop().await;

    // Without [metrics.auth] the endpoint is open (and bound to loopback by default).
    assert_eq!(
        hookrelay::Config::from_toml("[bbb]\nsecret='x'\n")
            .unwrap()
            .metrics
            .bind
            .ip()
            .to_string(),
        "127.0.0.1"
    );
    let relay = TestRelay::start(&redis).await;
    let open = http
        .get(format!("http://{}/metrics", relay.metrics))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 200);
    relay.stop().await;
}

#[tokio::test]
async fn hooks_callbacks_queues_and_the_bus_are_measured() {
    let mut redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/global"), "").await;
    relay
        .create_hook(&rx.url("/meeting"), "meetingID=ext-1")
        .await;
    relay.create_hook(&rx.url("/raw"), "getRaw=true").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    rx.wait_delivered(6).await;
    let m = relay.metrics().await;
    for (series, value) in [
        (r#"hookrelay_hooks_by_kind{kind="global"}"#, 2.0),
        (r#"hookrelay_hooks_by_kind{kind="meeting"}"#, 1.0),
        (r#"hookrelay_hooks_by_kind{kind="raw"}"#, 1.0),
        (r#"hookrelay_hooks_by_kind{kind="permanent"}"#, 0.0),
        ("hookrelay_hooks_registered", 3.0),
        ("hookrelay_callback_latency_seconds_count", 6.0),
        ("hookrelay_redis_connected", 1.0),
        (
            &format!(
                "hookrelay_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            ),
            1.0,
        ),
    ] {
        assert_eq!(metric_value(&m, series), value, "{series} in\n{m}");
    }
    // The last message came just now.
    let since = metric_value(&m, "hookrelay_bus_seconds_since_last_message");
    assert!((0.0..5.0).contains(&since), "{since}");
    // Every callback took longer than nothing and less than the test.
    let sum = metric_value(&m, "hookrelay_callback_latency_seconds_sum");
    assert!(sum > 0.0 && sum < 60.0, "{sum}");

    // The bus connection's loss shows.
    redis.kill().await;
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    while metric_value(&relay.metrics().await, "hookrelay_redis_connected") != 0.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never shown as lost"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    redis.start_again().await;
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    while metric_value(&relay.metrics().await, "hookrelay_redis_connected") != 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never shown as back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    relay.stop().await;
}

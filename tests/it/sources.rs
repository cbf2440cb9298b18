//! Several sources: one relay listening to two conference servers' buses (each its own
//! `redis-server`), with its hooks, mappings and queues in a third (the store).

use hookrelay::Config;

use crate::support::receiver::Received;

use crate::support::{
    SECRET, TestReceiver, TestRedis, TestRelay, meeting_created, metric_value, user_joined,
    user_name, wait::until,
};

fn config(store: &TestRedis, a: &TestRedis, b: &TestRedis) -> Config {
    let text = format!(
        r#"
        [bbb]
        secret = "{SECRET}"
        [store]
        url = "{}"
        [[sources]]
        name = "a"
        url = "{}"
        server_domain = "a.example"
        [[sources]]
        name = "b"
        url = "{}"
        server_domain = "b.example"
        [delivery]
        compat = "reference"
        retry_intervals_ms = [60000]
        request_timeout_ms = 1000
        [delivery.ssrf]
        allow_cidrs = ["127.0.0.1/32"]
        "#,
        store.url(),
        a.url(),
        b.url()
    );
    Config::from_toml(&text).expect("test config")
}

/// Waits until `path` has received `n` callbacks; returns them in order.
async fn callbacks_to(receiver: &TestReceiver, path: &str, n: usize) -> Vec<Received> {
    until(&format!("{n} callbacks to {path}"), async || {
        let got: Vec<Received> = receiver
            .delivered()
            .into_iter()
            .filter(|r| r.uri.starts_with(path))
            .collect();
        match got.len() >= n {
            true => Ok(got),
            false => Err(got.iter().map(|r| r.body.clone()).collect::<Vec<_>>()),
        }
    })
    .await
}

/// What a test reads of each callback: the server's domain (body field and header), the
/// event id, the external meeting id and the user's name.
fn summary(r: &Received) -> (String, String, String, String, String) {
    // Reference compat mode: `event=[<json>]`.
    let events: serde_json::Value = serde_json::from_str(&r.event()).expect("event JSON");
    let event = &events[0];
    let header = r
        .headers
        .get("x-hookrelay-domain")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (
        r.field("domain").unwrap_or_default(),
        header,
        event["data"]["id"].as_str().unwrap_or_default().to_string(),
        event["data"]["attributes"]["meeting"]["external-meeting-id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        user_name(&event.to_string()),
    )
}

fn row(domain: &str, id: &str, ext: &str, user: &str) -> (String, String, String, String, String) {
    (
        domain.into(),
        domain.into(),
        id.into(),
        ext.into(),
        user.into(),
    )
}

async fn wait_metric(relay: &TestRelay, series: &str, value: f64) {
    until(&format!("{series} {value}"), async || {
        let m = relay.metrics().await;
        match metric_value(&m, series) == value {
            true => Ok(()),
            false => Err(m),
        }
    })
    .await;
}

#[tokio::test]
async fn two_servers_one_relay_mappings_apart_domains_kept_and_a_lost_server_touches_nothing_else()
{
    let store = TestRedis::start().await;
    let mut a = TestRedis::start().await;
    let b = TestRedis::start().await;
    let receiver = TestReceiver::start().await;
    let relay = TestRelay::start_with(&a, config(&store, &a, &b)).await;
    b.wait_for_subscriber().await;
    relay.create_hook(&receiver.url("/all"), "").await;
    let b_hook = relay
        .create_hook(&receiver.url("/b"), "meetingID=ext-b")
        .await;

    // The same internal meeting id on both servers, each with its own external id.
    a.publish(&meeting_created("m1", "ext-a")).await;
    b.publish(&meeting_created("m1", "ext-b")).await;
    a.publish(&user_joined("m1", "u1", "Ann")).await;
    b.publish(&user_joined("m1", "u2", "Bob")).await;

    let only_b: Vec<_> = callbacks_to(&receiver, "/b", 2)
        .await
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        only_b,
        [
            row("b.example", "meeting-created", "ext-b", ""),
            row("b.example", "user-joined", "ext-b", "Bob"),
        ]
    );
    let all: Vec<_> = callbacks_to(&receiver, "/all", 4)
        .await
        .iter()
        .map(summary)
        .collect();
    assert_eq!(all.len(), 4, "{all:?}");
    let of = |domain: &str| -> Vec<_> { all.iter().filter(|r| r.0 == domain).cloned().collect() };
    assert_eq!(
        of("a.example"),
        [
            row("a.example", "meeting-created", "ext-a", ""),
            row("a.example", "user-joined", "ext-a", "Ann"),
        ],
        "each server's events in its bus order"
    );
    assert_eq!(of("b.example").len(), 2);

    // Hooks and each source's mappings live in the store, under keys of their own; the
    // servers' own Redis hold nothing of the relay's.
    assert_eq!(
        store
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        2
    );
    for (source, ext) in [("a", "ext-a"), ("b", "ext-b")] {
        let key = format!("bigbluebutton:webhooks:proc:{{src:{source}}}:mapping:m1");
        assert_eq!(
            store.hgetall(&key).await.get("externalMeetingID").cloned(),
            Some(ext.to_string()),
            "{key}"
        );
    }
    assert!(
        store
            .hgetall("bigbluebutton:webhooks:proc:mapping:m1")
            .await
            .is_empty()
    );
    assert!(
        a.smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .is_empty()
    );

    // The conference series are per server (`server`, the source's name), not summed.
    let m = relay.metrics().await;
    for server in ["a", "b"] {
        for (series, want) in [
            ("bbb_meetings", 1.0),
            ("bbb_meetings_participants", 1.0),
            ("bbb_api_up", 1.0),
            ("bbb_room_participants_gcount", 1.0),
        ] {
            let series = format!("{series}{{server=\"{server}\"}}");
            assert_eq!(metric_value(&m, &series), want, "{series}\n{m}");
        }
    }
    assert!(!m.contains("\nbbb_meetings "), "{m}");

    // Server a's Redis dies: b's events keep coming, and a's come again once it is back.
    a.kill().await;
    wait_metric(&relay, r#"hookrelay_redis_connected{source="a"}"#, 0.0).await;
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_redis_connected{source="b"}"#),
        1.0
    );
    // Only a's bbb_api_up says so.
    assert_eq!(metric_value(&m, r#"bbb_api_up{server="a"}"#), 0.0, "{m}");
    assert_eq!(metric_value(&m, r#"bbb_api_up{server="b"}"#), 1.0, "{m}");
    b.publish(&user_joined("m1", "u3", "Cy")).await;
    let b_now = callbacks_to(&receiver, "/b", 3).await;
    assert_eq!(
        summary(&b_now[2]),
        row("b.example", "user-joined", "ext-b", "Cy")
    );
    a.start_again().await;
    a.wait_for_subscriber().await;
    a.publish(&user_joined("m1", "u4", "Di")).await;
    let all = callbacks_to(&receiver, "/all", 6).await;
    assert_eq!(
        summary(&all[5]),
        row("a.example", "user-joined", "ext-a", "Di"),
        "a's mapping survived its server's restart"
    );
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_bus_reconnects_total{source="a"}"#),
        1.0
    );
    assert_eq!(
        metric_value(&m, r#"hookrelay_bus_reconnects_total{source="b"}"#),
        0.0
    );
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_events_mapped_total{source="b",event="user-joined"}"#
        ),
        2.0
    );

    // A callback of b waits in its queue (its receiver fails, the next try is a minute away)
    // with its source stored beside it.
    receiver.status_for_prefix("/b", 503);
    b.publish(&user_joined("m1", "u5", "Eve")).await;
    until("a try answered 503", async || {
        let statuses: Vec<u16> = receiver.received().iter().map(|r| r.status).collect();
        match statuses.contains(&503) {
            true => Ok(()),
            false => Err(statuses),
        }
    })
    .await;
    let mut conn = store.conn().await.expect("store");
    let queued = crate::support::redis::waiting_in(&mut conn, b_hook).await;
    assert_eq!(queued.ids.len(), 1);
    assert_eq!(queued.ids[0].get::<String>("o").as_deref(), Some("b"));

    // A restarted relay sends it with b's domain, and reads each source's mappings back from
    // the store.
    relay.stop().await;
    receiver.status_for_prefix("/none", 503);
    let relay = TestRelay::start_with(&a, config(&store, &a, &b)).await;
    b.wait_for_subscriber().await;
    b.publish(&user_joined("m1", "u6", "Fay")).await;
    let b_now = callbacks_to(&receiver, "/b", 5).await;
    let last: Vec<_> = b_now.iter().skip(3).map(summary).collect();
    assert_eq!(
        last,
        [
            row("b.example", "user-joined", "ext-b", "Eve"),
            row("b.example", "user-joined", "ext-b", "Fay"),
        ]
    );
    relay.stop().await;
}

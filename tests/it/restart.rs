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
    // bbb-webhooks' record stays as it was (for a way back), remembered as imported.
    let mut members = redis.smembers("bigbluebutton:webhooks:out:hooks").await;
    members.sort();
    assert_eq!(members, ["0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10", "1"]);
    assert_eq!(
        redis
            .hgetall(&format!("bigbluebutton:webhooks:out:hook:{uuid}"))
            .await["callbackURL"],
        rx.url("/v3")
    );
    assert_eq!(
        redis.hgetall("hookrelay:reference-seen").await[&format!("3.x:{uuid}")],
        "imported as hook 1"
    );
    // And it works: bound to its meeting, filtered to joins.
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = rx.wait_delivered(1).await;
    assert!(got[0].event().contains(r#""id":"user-joined""#));
    relay.stop().await;
}

/// Waits until `rx` has had a 2xx callback whose event contains `needle`; returns them all.
async fn wait_for_event(
    rx: &TestReceiver,
    needle: &str,
) -> Vec<crate::support::receiver::Received> {
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    loop {
        let got = rx.delivered();
        if got.iter().any(|r| r.event().contains(needle)) {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {needle} among {:?}",
            got.iter().map(|r| r.event()).collect::<Vec<_>>()
        );
        // The loop's pace: it polls the receiver until the event is among the callbacks.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_kill_right_after_meeting_created_keeps_the_meeting_mapping() {
    use crate::support::{RelayProcess, relay::create_hook, relay::http_client};
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    create_hook(
        &http_client(),
        relay.api,
        &rx.url("/bound"),
        "meetingID=ext-1",
    )
    .await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    // Killed the moment the meeting's first callback arrives: the mapping int-1 -> ext-1 was
    // persisted with that callback, in the same pipeline.
    rx.wait_delivered(1).await;
    relay.kill9().await;
    let relay = RelayProcess::start(&redis, "").await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = wait_for_event(&rx, r#""id":"user-joined""#).await;
    let joined = got
        .iter()
        .find(|r| r.event().contains(r#""id":"user-joined""#))
        .unwrap();
    assert!(
        joined.event().contains(r#""external-meeting-id":"ext-1""#),
        "{}",
        joined.event()
    );
    relay.terminate().await;
}

#[tokio::test]
async fn stored_hooks_that_hooks_create_would_refuse_are_not_loaded() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let mut c = redis.conn().await.unwrap();
    let uuid = "5d7c2b40-1111-4c55-9a51-1f3f2d2a7e10";
    let ok = rx.url("/ok");
    let records: [(&str, &str); 4] = [
        ("5", "http://10.1.2.3/internal"),
        ("6", ok.as_str()),
        ("7", "not a url"),
        (uuid, "http://169.254.169.254/latest/meta-data"),
    ];
    let mut pipe = redis::pipe();
    for (id, url) in records {
        pipe.hset_multiple(
            format!("bigbluebutton:webhooks:out:hook:{id}"),
            &[
                ("id", id),
                ("callbackURL", url),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .ignore()
        .sadd("bigbluebutton:webhooks:out:hooks", id)
        .ignore();
    }
    let () = pipe.query_async(&mut c).await.unwrap();
    let relay = TestRelay::start(&redis).await;
    let list = relay.call("list", "").await;
    assert_eq!(list.matches("<hook>").count(), 1, "{list}");
    assert!(list.contains("<hookID>6</hookID>"), "{list}");
    let m = relay.metrics().await;
    assert!(m.contains("hookrelay_hooks_refused_total 3"), "{m}");
    // Left in Redis, untouched: a wider allow-list brings them back.
    for (id, url) in records {
        assert_eq!(
            redis
                .hgetall(&format!("bigbluebutton:webhooks:out:hook:{id}"))
                .await
                .get("callbackURL")
                .map(String::as_str),
            Some(url)
        );
    }
    // The allowed one is delivered to; nothing else is attempted.
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    rx.wait_delivered(1).await;
    assert!(
        !relay
            .metrics()
            .await
            .contains(r#"hookrelay_callback_failures_total{tenant="",reason="blocked"}"#)
    );
    relay.stop().await;
}

/// What was published before a SIGTERM is processed before the relay exits (it unsubscribes
/// and takes what came before Redis confirmed it), and delivered after the restart: none lost,
/// none twice. Before, the messages not yet read off the connection at the stop were lost (in
/// one of three runs, 446 of these 500).
#[tokio::test]
async fn messages_published_right_before_a_sigterm_are_delivered_after_the_restart() {
    use crate::support::{RelayProcess, check_no_loss, relay::create_hook, relay::http_client};
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    create_hook(&http_client(), relay.api, &rx.url("/all"), "").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    // 500 joins in pipelines, and SIGTERM the moment the last is published.
    redis.publish_users(0..500).await;
    relay.terminate().await;
    let relay = RelayProcess::start(&redis, "").await;
    let got = rx.wait_delivered(501).await;
    let names: Vec<String> = got[1..]
        .iter()
        .map(|r| crate::support::user_name(&r.event()))
        .collect();
    assert_eq!(check_no_loss(&names, 500), 0, "a join came twice");
    relay.terminate().await;
}

/// A service manager's stop the moment the relay is up (subscribed, its API answering, its
/// state maybe still being read back): what the bus handed on before the stop is processed at
/// the stop, and the next start delivers it. Five such starts, then one that stays: every
/// meeting's event once, in bus order.
#[tokio::test]
async fn a_stop_right_after_the_start_loses_nothing_of_what_was_published() {
    use crate::support::{RelayProcess, relay::create_hook, relay::http_client};
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    create_hook(&http_client(), relay.api, &rx.url("/all"), "").await;
    relay.terminate().await;
    // Keys for the start to look through (queues named as by an earlier version are looked
    // for): its state is read back well after it subscribed, a window a stop can fall into.
    let mut c = redis.conn().await.expect("the test Redis");
    for chunk in 0..3 {
        let mut mset = redis::cmd("MSET");
        for i in 0..10_000 {
            mset.arg(format!("filler:{chunk}:{i}")).arg("x");
        }
        let () = mset.query_async(&mut c).await.expect("MSET");
    }
    let mut want = Vec::new();
    for i in 0..5 {
        let relay = RelayProcess::start(&redis, "").await;
        redis
            .publish(&meeting_created(&format!("int-{i}"), &format!("ext-{i}")))
            .await;
        want.push(format!("ext-{i}"));
        relay.terminate().await;
    }
    let relay = RelayProcess::start(&redis, "").await;
    let got = rx.wait_delivered(want.len()).await;
    let meetings: Vec<String> = got
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.event()).expect("event JSON");
            v["data"]["attributes"]["meeting"]["external-meeting-id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(meetings, want);
    relay.terminate().await;
    assert_eq!(rx.delivered_count(), want.len(), "nothing twice");
}

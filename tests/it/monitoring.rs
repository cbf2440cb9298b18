//! The relay's own metrics: access control on the metrics listener, and the series about hooks,
//! callbacks, queues and the bus connection.

use crate::support::{
    TestReceiver, TestRedis, TestRelay, akka,
    bbb_api::FakeBbbApi,
    meeting_created, meeting_ended, metric_value, rap,
    relay::http_client,
    user_joined,
    wait::{until, until_within},
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
        hookrelay::Config::from_toml("[bbb]\nsecret='long-test-secret'\n")
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
    // The receiver counts a callback before the relay has read its answer and measured it.
    let m = metrics_once(&relay, |m| {
        metric_value(m, "hookrelay_callback_latency_seconds_count") == 6.0
    })
    .await;
    for (series, value) in [
        (r#"hookrelay_hooks_by_kind{kind="global"}"#, 2.0),
        (r#"hookrelay_hooks_by_kind{kind="meeting"}"#, 1.0),
        (r#"hookrelay_hooks_by_kind{kind="raw"}"#, 1.0),
        (r#"hookrelay_hooks_by_kind{kind="permanent"}"#, 0.0),
        ("hookrelay_hooks_registered", 3.0),
        ("hookrelay_callback_latency_seconds_count", 6.0),
        (r#"hookrelay_redis_connected{source="default"}"#, 1.0),
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
    let since = metric_value(
        &m,
        r#"hookrelay_bus_seconds_since_last_message{source="default"}"#,
    );
    assert!((0.0..5.0).contains(&since), "{since}");
    // Every callback took longer than nothing and less than the test.
    let sum = metric_value(&m, "hookrelay_callback_latency_seconds_sum");
    assert!(sum > 0.0 && sum < 60.0, "{sum}");

    // The bus connection's loss shows.
    redis.kill().await;
    until("shown as lost", async || {
        let connected = metric_value(&relay.metrics().await, CONNECTED);
        match connected == 0.0 {
            true => Ok(()),
            false => Err(connected),
        }
    })
    .await;
    redis.start_again().await;
    until("shown as back", async || {
        let connected = metric_value(&relay.metrics().await, CONNECTED);
        match connected == 1.0 {
            true => Ok(()),
            false => Err(connected),
        }
    })
    .await;
    relay.stop().await;
}

/// The relay's metrics (OpenMetrics, as Prometheus scrapes them) once `ready` holds of them
/// (within ten seconds): the conference's state follows the bus beside delivery, so a
/// marker's callback can come first.
async fn metrics_once(relay: &TestRelay, ready: impl Fn(&str) -> bool) -> String {
    let ten = std::time::Duration::from_secs(10);
    until_within("the metrics ready", ten, async || {
        let text = relay.metrics().await;
        match ready(&text) {
            true => Ok(text),
            false => Err(text),
        }
    })
    .await
}

/// The names of the conference families a scrape shows, sorted.
fn conference_families(text: &str) -> Vec<String> {
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("invalid exposition: {e:?}\n{text}"));
    let mut names: Vec<String> = parsed
        .families
        .into_keys()
        .filter(|n| n.starts_with("bbb_"))
        .collect();
    names.sort();
    names
}

/// The conference series a scrape shows, parsed by a real OpenMetrics parser (which also
/// proves the exposition valid).
fn conference_series(text: &str) -> Vec<(String, f64)> {
    let names = conference_families(text);
    assert_eq!(names.len(), 23, "{names:?}");
    text.lines()
        .filter(|l| l.starts_with("bbb_") && !l.starts_with("bbb_unique"))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_string(), value.parse().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn conference_metrics_follow_a_scripted_meeting_and_survive_a_restart() {
    use serde_json::json;
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let marker = TestReceiver::start().await;
    relay
        .create_hook(&marker.url("/"), "eventID=rap-deleted")
        .await;
    let joined = |mid: &str, uid: &str, client: &str| {
        akka(
            "UserJoinedMeetingEvtMsg",
            mid,
            uid,
            json!({"intId": uid, "name": uid, "clientType": client}),
        )
    };
    let voice = |uid: &str, listen: bool| {
        akka(
            "UserJoinedVoiceConfToClientEvtMsg",
            "int-1",
            uid,
            json!({"listenOnly": listen}),
        )
    };
    let cam = |uid: &str, stream: &str, on: bool| {
        let name = if on {
            "UserBroadcastCamStartedEvtMsg"
        } else {
            "UserBroadcastCamStoppedEvtMsg"
        };
        akka(name, "int-1", uid, json!({"stream": stream}))
    };
    let breakout =
        meeting_created("br-1", "ext-br").replace(r#""isBreakout":false"#, r#""isBreakout":true"#);
    assert!(breakout.contains(r#""isBreakout":true"#));
    let script = [
        meeting_created("int-1", "ext-1"),
        joined("int-1", "a", "HTML5"),
        joined("int-1", "b", "HTML5"),
        joined("int-1", "b", "HTML5"),
        joined("int-1", "c", "HTML5"),
        joined("int-1", "p", "dial-in-user"),
        voice("a", false),
        voice("b", true),
        voice("p", false),
        cam("a", "a_1", true),
        cam("c", "c_1", true),
        cam("c", "c_2", true),
        cam("c", "c_2", false),
        akka("UserLeftVoiceConfToClientEvtMsg", "int-1", "a", json!({})),
        akka("UserLeftMeetingEvtMsg", "int-1", "c", json!({})),
        akka("UserLeftMeetingEvtMsg", "int-1", "nobody", json!({})),
        breakout,
        joined("br-1", "d", "HTML5"),
        meeting_created("int-2", "ext-2"),
        joined("int-2", "e", "HTML5"),
        meeting_ended("int-2"),
        rap("archive_started", "r1"),
        rap("post_publish_ended", "r2"),
        rap("published", "r3"),
        rap("unpublished", "r3"),
        rap("deleted", "r4"),
    ];
    for m in &script {
        redis.publish(m).await;
    }
    marker.wait_delivered(1).await;
    let text = metrics_once(&relay, |t| {
        t.lines().any(|l| l == "bbb_recordings_deleted 1") && conference_families(t).len() == 23
    })
    .await;
    let got = conference_series(&text);
    let value = |series: &str| {
        got.iter()
            .find(|(s, _)| s == series)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{series} missing in\n{text}"))
    };
    for (series, want) in [
        ("bbb_meetings", 2.0),
        ("bbb_breakout_rooms", 1.0),
        ("bbb_meetings_participants", 4.0), // a, b, p; d in the breakout room
        ("bbb_meetings_listeners", 1.0),    // b
        ("bbb_meetings_voice_participants", 1.0), // p (a left the audio)
        ("bbb_meetings_video_participants", 1.0), // a_1 (c left with c_1)
        (r#"bbb_meetings_participant_clients{type="html5"}"#, 3.0),
        (r#"bbb_meetings_participant_clients{type="dial-in"}"#, 1.0),
        (r#"bbb_meetings_participant_clients{type="flash"}"#, 0.0),
        ("bbb_meetings_participants_max", 3.0),
        (
            r#"bbb_meetings_participants_origin{server="",name=""}"#,
            4.0,
        ),
        ("bbb_room_participants_gcount", 2.0),
        ("bbb_room_participants_gsum", 4.0),
        (r#"bbb_room_participants_bucket{le="1"}"#, 1.0),
        (r#"bbb_room_participants_bucket{le="5"}"#, 2.0),
        (r#"bbb_room_participants_bucket{le="500"}"#, 2.0),
        (r#"bbb_room_participants_bucket{le="+Inf"}"#, 2.0),
        ("bbb_room_listeners_gsum", 1.0),
        ("bbb_room_voice_participants_gsum", 1.0),
        (r#"bbb_room_voice_participants_bucket{le="120"}"#, 2.0),
        ("bbb_room_video_participants_gsum", 1.0),
        ("bbb_api_up", 1.0),
        (r#"bbb_exporter{version="0.1.0-hookrelay"}"#, 1.0),
        ("bbb_recordings_unprocessed", 1.0), // r1: archived, not processed yet
        ("bbb_recordings_processing", 0.0),
        ("bbb_recordings_published", 1.0),
        ("bbb_recordings_unpublished", 1.0),
        ("bbb_recordings_deleted", 1.0),
    ] {
        assert_eq!(value(series), want, "{series} in\n{text}");
    }
    assert_eq!(metric_value(&text, "bbb_unique_meetings_total"), 2.0);
    assert_eq!(metric_value(&text, "bbb_unique_breakout_rooms_total"), 1.0);
    relay.stop().await;

    // The same after a restart: the state was kept in Redis (the unique counters count since
    // the start, as counters do).
    let relay = TestRelay::start(&redis).await;
    // The scrape answers before the state is read back, and shows none of it until then:
    // the first scrape that shows any of it shows all of it (never an empty server).
    let again = metrics_once(&relay, |t| !conference_families(t).is_empty()).await;
    assert_eq!(conference_series(&again), got);
    assert_eq!(metric_value(&again, "bbb_unique_meetings_total"), 0.0);
    // And it goes on from there: the meeting ends, everything of it goes.
    redis.publish(&meeting_ended("int-1")).await;
    redis.publish(&rap("deleted", "r5")).await;
    marker.wait_delivered(2).await;
    let after = metrics_once(&relay, |t| metric_value(t, "bbb_recordings_deleted") == 2.0).await;
    assert_eq!(metric_value(&after, "bbb_meetings"), 1.0);
    assert_eq!(metric_value(&after, "bbb_meetings_participants"), 1.0);
    assert_eq!(metric_value(&after, "bbb_recordings_deleted"), 2.0);
    relay.stop().await;
}

/// A fake exporter on loopback answering every GET with `body` after `delay`.
async fn fake_exporter(body: &'static str, delay: std::time::Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            // Part of the scenario: an exporter that answers late (or at once).
            tokio::time::sleep(delay).await;
            body
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/metrics")
}

#[tokio::test]
async fn the_merged_endpoint_survives_clashes_slow_and_broken_sources() {
    use hookrelay::config::MergeSource;
    use std::time::Duration;
    let redis = TestRedis::start().await;
    let a = fake_exporter(
        "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.5\n\
         # TYPE clash gauge\nclash 1\n# TYPE only_a_total counter\nonly_a_total{source=\"disk\"} 4\n\
         # TYPE req_seconds histogram\nreq_seconds_bucket{le=\"1.0\"} 1\nreq_seconds_bucket{le=\"+Inf\"} 2\n\
         req_seconds_sum 1.5\nreq_seconds_count 2\n",
        Duration::ZERO,
    )
    .await;
    let b = fake_exporter(
        "# HELP node_load1 Other help.\n# TYPE node_load1 gauge\nnode_load1{cpu=\"all\"} 0.7\n\
         # TYPE clash counter\nclash 2\n\
         # TYPE hookrelay_bus_messages_total counter\nhookrelay_bus_messages_total 99\n\
         # TYPE req_seconds histogram\nreq_seconds_bucket{le=\"1\"} 3\nreq_seconds_bucket{le=\"+Inf\"} 4\n\
         req_seconds_sum 2\nreq_seconds_count 4\n",
        Duration::ZERO,
    )
    .await;
    let slow = fake_exporter("# TYPE slow gauge\nslow 1\n", Duration::from_secs(5)).await;
    let garbage = fake_exporter("this { is not = metrics\n", Duration::ZERO).await;
    let mut config = TestRelay::config(&redis);
    config.metrics.merge.sources = [("a", a), ("b", b), ("slow", slow), ("garbage", garbage)]
        .into_iter()
        .map(|(name, url)| MergeSource {
            name: name.into(),
            url,
            timeout_ms: 300,
        })
        .collect();
    let relay = TestRelay::start_with(&redis, config).await;
    // The conference shows once its state is read back from the store.
    metrics_once(&relay, |t| {
        t.lines().any(|l| l.starts_with("bbb_meetings "))
    })
    .await;
    let http = http_client();
    let response = http
        .get(format!("http://{}/metrics/all", relay.metrics))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    // One valid exposition, by a real parser.
    let parsed = openmetrics_parser::prometheus::parse_prometheus(&text)
        .unwrap_or_else(|e| panic!("invalid merged exposition: {e:?}\n{text}"));
    let samples = |family: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| {
                l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} "))
            })
            .map(String::from)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        samples("node_load1"),
        [
            r#"node_load1{cpu="",source="a"} 0.5"#,
            r#"node_load1{cpu="all",source="b"} 0.7"#
        ]
    );
    assert_eq!(
        text.matches("# TYPE node_load1 gauge").count(),
        1,
        "one header for the merged family"
    );
    assert!(text.contains("# HELP node_load1 1m load average."));
    // The TYPE clash: the first source's family stays, the other's is left out.
    assert_eq!(samples("clash"), [r#"clash{source="a"} 1"#]);
    assert_eq!(
        samples("only_a_total"),
        [r#"only_a_total{exported_source="disk",source="a"} 4"#]
    );
    // Each source's bucket bounds as it spelled them (Python's client writes `1.0`, Go's `1`).
    assert_eq!(
        samples("req_seconds_bucket"),
        [
            r#"req_seconds_bucket{source="a",le="+Inf"} 2"#,
            r#"req_seconds_bucket{source="a",le="1.0"} 1"#,
            r#"req_seconds_bucket{source="b",le="+Inf"} 4"#,
            r#"req_seconds_bucket{source="b",le="1"} 3"#
        ]
    );
    // The relay's own series are in, merged with a source's family of the same name and TYPE.
    let own = samples("hookrelay_bus_messages_total");
    assert_eq!(own.len(), 2, "{own:?}");
    assert!(own.iter().any(|l| l.contains(r#"source="hookrelay""#)));
    assert!(
        own.iter()
            .any(|l| l.contains(r#"source="b""#) && l.ends_with(" 99"))
    );
    assert!(!samples("bbb_meetings").is_empty());
    // The rooms' gauge histograms with the series bbb-exporter writes in this format: the
    // buckets (a histogram's), then the count and the sum, as gauges.
    assert_eq!(
        samples("bbb_room_voice_participants_bucket").len(),
        9,
        "0, 1, 5, 15, 30, 60, 90, 120, +Inf"
    );
    assert!(
        samples("bbb_room_voice_participants_bucket")
            .iter()
            .any(|l| l
                .starts_with(r#"bbb_room_voice_participants_bucket{source="hookrelay",le="120"}"#))
    );
    assert_eq!(samples("bbb_room_participants_gcount").len(), 1);
    assert!(text.contains("# TYPE bbb_room_participants_gsum gauge"));
    // Failed sources are left out and shown (the relay's own `source` label becomes
    // exported_source there, as every source's does).
    assert!(samples("slow").is_empty());
    for (source, up) in [("a", 1.0), ("b", 1.0), ("slow", 0.0), ("garbage", 0.0)] {
        let series =
            format!(r#"hookrelay_merge_up{{exported_source="{source}",source="hookrelay"}}"#);
        let line = text
            .lines()
            .find(|l| l.starts_with(&series))
            .unwrap_or_else(|| panic!("{series} missing in\n{text}"));
        assert!(line.ends_with(&format!(" {up}")), "{line}");
    }
    assert!(parsed.families.contains_key("hookrelay_merge_up"));
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_merge_left_out_total{source="b"}"#),
        1.0
    );
    relay.stop().await;
}

fn meetings_xml(attendees: &[(&str, &str, bool, bool)]) -> String {
    let people: String = attendees
        .iter()
        .map(|(id, client, listen, video)| {
            format!(
                "<attendee><userID>{id}</userID><clientType>{client}</clientType>\
                 <isListeningOnly>{listen}</isListeningOnly><hasJoinedVoice>{}</hasJoinedVoice>\
                 <hasVideo>{video}</hasVideo></attendee>",
                !listen
            )
        })
        .collect();
    format!(
        "<response><returncode>SUCCESS</returncode><meetings><meeting>\
         <internalMeetingID>int-9</internalMeetingID><isBreakout>false</isBreakout>\
         <attendees>{people}</attendees></meeting></meetings></response>"
    )
}

#[tokio::test]
async fn get_meetings_seeds_the_state_at_start_and_after_a_reconnect() {
    let mut redis = TestRedis::start().await;
    let api = FakeBbbApi::start(meetings_xml(&[
        ("u1", "HTML5", false, true),
        ("u2", "HTML5", true, false),
    ]))
    .await;
    let mut config = TestRelay::config(&redis);
    config.bbb.api_url = api.url.clone();
    // Here only at (re)subscription.
    config.bbb.reconcile_interval_s = 0;
    let relay = TestRelay::start_with(&redis, config).await;
    let wait_for = |series: &'static str, want: f64| {
        let relay = &relay;
        async move {
            until(&format!("{series} {want}"), async || {
                let m = relay.metrics().await;
                match metric_value(&m, series) == want {
                    true => Ok(m),
                    false => Err(m),
                }
            })
            .await
        }
    };
    // No bus event at all: the meeting is known from getMeetings (the seeding is counted once
    // its getRecordings calls are done too).
    let m = wait_for(
        r#"hookrelay_conference_seeds_total{source="default",result="ok"}"#,
        1.0,
    )
    .await;
    assert_eq!(metric_value(&m, "bbb_meetings_participants"), 2.0);
    assert_eq!(metric_value(&m, "bbb_meetings"), 1.0);
    assert_eq!(metric_value(&m, "bbb_meetings_listeners"), 1.0);
    assert_eq!(metric_value(&m, "bbb_meetings_voice_participants"), 1.0);
    assert_eq!(metric_value(&m, "bbb_meetings_video_participants"), 1.0);
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_conference_seeds_total{source="default",result="ok"}"#
        ),
        1.0
    );
    // The bus goes on from there: a camera stop of the seeded camera, a join.
    redis
        .publish(&akka(
            "UserBroadcastCamStoppedEvtMsg",
            "int-9",
            "u1",
            serde_json::json!({"stream": "u1_real_stream_id"}),
        ))
        .await;
    redis.publish(&user_joined("int-9", "u3", "Cid")).await;
    let m = wait_for("bbb_meetings_participants", 3.0).await;
    assert_eq!(metric_value(&m, "bbb_meetings_video_participants"), 0.0);

    // Redis goes away and comes back: the state is taken from getMeetings again.
    api.set_meetings(meetings_xml(&[("u9", "DIAL-IN", false, false)]));
    redis.kill().await;
    redis.start_again().await;
    let m = wait_for("bbb_meetings_participants", 1.0).await;
    assert_eq!(
        metric_value(&m, r#"bbb_meetings_participant_clients{type="dial-in"}"#),
        1.0
    );
    relay.stop().await;
}

const CONNECTED: &str = r#"hookrelay_redis_connected{source="default"}"#;

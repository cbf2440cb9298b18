//! WebAssembly plugins end to end: the example plugins' effects, chain order and scope, raw
//! hooks, runaway and broken plugins contained, failure marking. Plugins are the real components
//! built from `plugins/`; reloading is in `plugin_reload`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    PluginDir, TestReceiver, TestRedis, TestRelay, fixture, meeting_created,
    meeting_created_with_metadata, meeting_ended, metric_value, user_joined, wait::until,
};

pub(crate) fn parse(event: &str) -> Value {
    serde_json::from_str(event).expect("callback event is JSON")
}

fn ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The relay with `dir` as its plugin folder (quick reloads).
pub(crate) async fn start(redis: &TestRedis, dir: &PluginDir) -> TestRelay {
    let mut config = TestRelay::config(redis);
    config.plugins.dir = Some(dir.path().to_path_buf());
    config.plugins.cache_dir = Some(dir.path().join(".cache"));
    config.plugins.reload_debounce_ms = 100;
    TestRelay::start_with(redis, config).await
}

/// Polls the relay's metrics until `series` reaches `at_least`.
pub(crate) async fn wait_metric(relay: &TestRelay, series: &str, at_least: f64) -> String {
    until(&format!("{series} at {at_least} or more"), async || {
        let m = relay.metrics().await;
        match metric_value(&m, series) >= at_least {
            true => Ok(m),
            false => Err(m),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_plugins_each_change_what_their_hook_gets() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add(
        "10-filter",
        "event_filter",
        Some("[scope]\nhooks = [1]\n[config]\nallow = [\"meeting-created\", \"meeting-ended\"]\n"),
    );
    dir.add(
        "20-redact",
        "redact",
        Some("[scope]\nhooks = [2]\n[config]\nfields = [\"name\"]\nmode = \"mask\"\n"),
    );
    dir.add("30-slack", "slack_format", Some("[scope]\nhooks = [3]\n"));
    dir.add(
        "40-metadata",
        "meeting_metadata",
        Some("[scope]\nhooks = [4]\n"),
    );
    let relay = start(&redis, &dir).await;
    let receivers = [
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
    ];
    for (i, r) in receivers.iter().enumerate() {
        let id = relay.create_hook(&r.url("/cb"), "").await;
        assert_eq!(id, i as u64 + 1);
    }
    let metadata = json!({"bbb-origin": "lms", "course": "42"});
    let mut messages = vec![meeting_created_with_metadata(
        "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700",
        "random-9019868",
        &metadata,
    )];
    messages.extend((2..=24).map(|line| fixture(line).0));
    redis.publish_all(&messages).await;

    // Hook 5 has no plugin: the reference's events, unchanged.
    let plain: Vec<Value> = receivers[4]
        .wait_delivered(24)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect();
    let all_ids = ids(&plain);
    assert_eq!(all_ids.first().map(String::as_str), Some("meeting-created"));
    assert_eq!(all_ids.last().map(String::as_str), Some("meeting-ended"));
    let joined_names: Vec<&str> = plain
        .iter()
        .filter(|e| e["data"]["id"] == "user-joined")
        .filter_map(|e| e["data"]["attributes"]["user"]["name"].as_str())
        .collect();
    assert_eq!(joined_names.len(), 2);
    assert!(joined_names.iter().all(|n| *n != "***"));

    // event-filter: only the allowed ids.
    let filtered: Vec<Value> = receivers[0]
        .wait_delivered(2)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect();
    assert_eq!(ids(&filtered), ["meeting-created", "meeting-ended"]);

    // redact: every `name` masked, the rest as it was.
    let redacted: Vec<Value> = receivers[1]
        .wait_delivered(24)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect();
    assert_eq!(ids(&redacted), all_ids);
    for (r, p) in redacted.iter().zip(&plain) {
        let mut expected = p.clone();
        mask_names(&mut expected);
        assert_eq!(*r, expected);
    }
    assert_eq!(redacted[0]["data"]["attributes"]["meeting"]["name"], "***");

    // slack-format: meeting events become chat messages; the others pass untouched.
    let slack: Vec<Value> = receivers[2]
        .wait_delivered(24)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect();
    for (s, p) in slack.iter().zip(&plain) {
        let id = p["data"]["id"].as_str().unwrap_or_default();
        if id.starts_with("meeting-") {
            assert_eq!(s["event"], id, "{s}");
            assert!(s["text"].as_str().is_some_and(|t| !t.is_empty()), "{s}");
            assert_eq!(s["meeting"], "random-9019868");
        } else {
            assert_eq!(s, p);
        }
    }

    // meeting-metadata: every later event of the meeting carries the metadata.
    let with_meta: Vec<Value> = receivers[3]
        .wait_delivered(24)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect();
    assert_eq!(ids(&with_meta), all_ids);
    for e in &with_meta {
        assert_eq!(
            e["data"]["attributes"]["meeting"]["metadata"], metadata,
            "{e}"
        );
    }

    // A marker the filter lets through: a filtered event sent by mistake would come before it.
    redis
        .publish(&meeting_created("marker-int", "marker-ext"))
        .await;
    let filtered = receivers[0].wait_delivered(3).await;
    assert!(
        filtered[2].event().contains("marker-ext"),
        "{}",
        filtered[2].event()
    );
    assert_eq!(
        receivers[0].received().len(),
        3,
        "filtered events were sent"
    );
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_plugin_calls_total{plugin="10-filter",action="drop"}"#
        ),
        22.0
    );
    assert_eq!(metric_value(&m, "hookrelay_plugins_loaded"), 4.0);
    relay.stop().await;
}

fn mask_names(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k == "name" {
                    *x = Value::String("***".into());
                } else {
                    mask_names(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_names),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chain_runs_in_file_name_order_within_each_plugins_scope() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    // Written in reverse: the order comes from the names.
    dir.add(
        "20-second",
        "testing_tag",
        Some("[scope]\nhooks = [1, 3]\n[config]\ntag = \"b\"\n"),
    );
    dir.add("10-first", "testing_tag", Some("[config]\ntag = \"a\"\n"));
    dir.add(
        "30-meeting",
        "testing_tag",
        Some("[scope]\nmeetings = [\"other-meeting\"]\n[config]\ntag = \"c\"\n"),
    );
    let relay = start(&redis, &dir).await;
    let (r1, r2, r3) = (
        TestReceiver::start().await,
        TestReceiver::start().await,
        TestReceiver::start().await,
    );
    assert_eq!(relay.create_hook(&r1.url("/1"), "").await, 1);
    assert_eq!(relay.create_hook(&r2.url("/2"), "").await, 2);
    assert_eq!(relay.create_hook(&r3.url("/3"), "&getRaw=true").await, 3);
    redis
        .publish_all(&[
            meeting_created("m1", "ext-1"),
            user_joined("m1", "u1", "Ann"),
            meeting_created("m2", "other-meeting"),
        ])
        .await;
    let chain = |r: &crate::support::receiver::Received| parse(&r.event())["chain"].clone();
    let got1: Vec<Value> = r1.wait_delivered(3).await.iter().map(chain).collect();
    assert_eq!(
        got1,
        [json!(["a", "b"]), json!(["a", "b"]), json!(["a", "b", "c"])]
    );
    let got2: Vec<Value> = r2.wait_delivered(3).await.iter().map(chain).collect();
    assert_eq!(got2, [json!(["a"]), json!(["a"]), json!(["a", "c"])]);
    // The raw hook gets the bus message, tagged by the same chain.
    let raw = r3.wait_delivered(3).await;
    let first = parse(&raw[0].event());
    assert_eq!(first["envelope"]["name"], "MeetingCreatedEvtMsg");
    assert_eq!(first["chain"], json!(["a", "b"]));
    assert_eq!(parse(&raw[2].event())["chain"], json!(["a", "b", "c"]));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_trapping_and_broken_plugins_are_contained() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    let on = "[config]\non = \"user-joined\"\n";
    dir.add(
        "10-loop",
        "testing_loop",
        Some(&format!("[scope]\nhooks = [1]\n{on}")),
    );
    dir.add(
        "20-bomb",
        "testing_memory_bomb",
        // A generous deadline: the memory limit, not the clock, must stop it.
        Some(&format!(
            "on_error = \"pass\"\ntimeout_ms = 2000\n[scope]\nhooks = [2]\n{on}"
        )),
    );
    dir.add(
        "30-trap",
        "testing_trap",
        Some(&format!("[scope]\nhooks = [3]\n{on}")),
    );
    dir.add(
        "40-invalid",
        "testing_tag",
        Some("[scope]\nhooks = [4]\n[config]\ntag = \"x\"\non = \"user-joined\"\ninvalid = true\n"),
    );
    dir.write("50-broken.wasm", b"\0asm but not really");
    dir.write("50-broken.toml", b"[scope]\nhooks = [5]\n");
    dir.add(
        "60-sleep",
        "testing_sleep",
        Some(&format!("[scope]\nhooks = [6]\n{on}")),
    );
    let relay = start(&redis, &dir).await;
    let mut receivers = Vec::new();
    for i in 1..=7 {
        let r = TestReceiver::start().await;
        assert_eq!(relay.create_hook(&r.url("/cb"), "").await, i);
        receivers.push(r);
    }
    redis
        .publish_all(&[
            meeting_created("m1", "ext-1"),
            user_joined("m1", "u1", "Ann"),
            user_joined("m1", "u2", "Bob"),
            meeting_ended("m1"),
        ])
        .await;
    let everything = ids(&receivers[6]
        .wait_delivered(6)
        .await
        .iter()
        .map(|r| parse(&r.event()))
        .collect::<Vec<_>>());
    assert_eq!(
        everything,
        [
            "meeting-created",
            "user-joined",
            "user-joined",
            "user-left",
            "user-left",
            "meeting-ended"
        ]
    );
    let without_joins = ["meeting-created", "user-left", "user-left", "meeting-ended"];
    for (i, r) in receivers[..6].iter().enumerate() {
        if i == 4 {
            continue;
        }
        // The bomb's policy is "pass": its hook gets everything; the others drop the joins.
        let expected: &[&str] = if i == 1 {
            &everything_refs(&everything)
        } else {
            &without_joins
        };
        let got: Vec<Value> = r
            .wait_delivered(expected.len())
            .await
            .iter()
            .map(|x| parse(&x.event()))
            .collect();
        assert_eq!(ids(&got), expected, "hook {}", i + 1);
    }
    // A plugin that cannot load at all applies its on_error policy (drop) to its scope.
    // Proves that nothing happens: the broken plugin's hook gets no callback.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receivers[4].received().is_empty());
    let m = relay.metrics().await;
    for (series, n) in [
        (
            r#"hookrelay_plugin_errors_total{plugin="10-loop",kind="timeout"}"#,
            2.0,
        ),
        (
            r#"hookrelay_plugin_errors_total{plugin="20-bomb",kind="memory"}"#,
            2.0,
        ),
        (
            r#"hookrelay_plugin_errors_total{plugin="30-trap",kind="trap"}"#,
            2.0,
        ),
        (
            r#"hookrelay_plugin_errors_total{plugin="40-invalid",kind="invalid_json"}"#,
            2.0,
        ),
        (
            r#"hookrelay_plugin_errors_total{plugin="50-broken",kind="not_loaded"}"#,
            6.0,
        ),
        (r#"hookrelay_plugin_failed{plugin="50-broken"}"#, 1.0),
        (
            r#"hookrelay_plugin_errors_total{plugin="60-sleep",kind="trap"}"#,
            2.0,
        ),
        (r#"hookrelay_plugin_failed{plugin="30-trap"}"#, 0.0),
        (r#"hookrelay_plugin_load_failed{plugin="50-broken"}"#, 1.0),
        (r#"hookrelay_plugin_load_failed{plugin="30-trap"}"#, 0.0),
        ("hookrelay_plugins_loaded", 5.0),
        (r#"hookrelay_plugin_reloads_total{result="error"}"#, 1.0),
    ] {
        let exposed = m.lines().any(|l| l.starts_with(&format!("{series} ")));
        assert!(exposed, "{series} is not exposed\n{m}");
        assert_eq!(metric_value(&m, series), n, "{series}\n{m}");
    }
    relay.stop().await;
}

fn everything_refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_keeps_failing_is_marked_failed_then_tried_again() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add(
        "10-trap",
        "testing_trap",
        Some("max_failures = 2\nfailed_cooldown_ms = 1500\n[config]\non = \"user-joined\"\n"),
    );
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay.create_hook(&r.url("/cb"), "").await;
    redis
        .publish_all(&[
            meeting_created("m1", "ext-1"),
            user_joined("m1", "u1", "Ann"),
            user_joined("m1", "u2", "Bob"),
        ])
        .await;
    let m = wait_metric(&relay, r#"hookrelay_plugin_failed{plugin="10-trap"}"#, 1.0).await;
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_plugin_errors_total{plugin="10-trap",kind="trap"}"#
        ),
        2.0
    );
    // While marked failed, the plugin is not called: its policy (drop) applies to everything.
    redis.publish(&user_joined("m1", "u3", "Cy")).await;
    wait_metric(
        &relay,
        r#"hookrelay_plugin_errors_total{plugin="10-trap",kind="marked_failed"}"#,
        1.0,
    )
    .await;
    // After the cool-down it runs again: a join traps, the meeting's end goes through.
    // Part of the scenario: the cool-down (1.5 s) runs out.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    redis
        .publish_all(&[user_joined("m1", "u4", "Dee"), meeting_ended("m1")])
        .await;
    let last = r.wait_delivered(6).await;
    let last_ids: Vec<Value> = last.iter().map(|x| parse(&x.event())).collect();
    assert_eq!(
        ids(&last_ids),
        [
            "meeting-created",
            "user-left",
            "user-left",
            "user-left",
            "user-left",
            "meeting-ended"
        ]
    );
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_plugin_errors_total{plugin="10-trap",kind="trap"}"#
        ),
        3.0
    );
    assert_eq!(
        metric_value(&m, r#"hookrelay_plugin_failed{plugin="10-trap"}"#),
        0.0
    );
    relay.stop().await;
}

//! Plugins changed while the relay runs: hot reload (add, replace, remove, broken replacement)
//! while events stream, and the compile cache across a restart.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    plugins::{parse, start, wait_metric},
    support::{
        PluginDir, TestReceiver, TestRedis, meeting_created, metric_value, user_joined, wait::until,
    },
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_while_events_stream_loses_and_repeats_nothing() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add("10-tag", "testing_tag", Some("[config]\ntag = \"v1\"\n"));
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay.create_hook(&r.url("/cb"), "").await;
    redis.publish(&meeting_created("m1", "ext-1")).await;

    let recompiled = r#"hookrelay_plugin_compiles_total{source="cache"}"#;
    let error = r#"hookrelay_plugin_reloads_total{result="error"}"#;
    let loaded = "hookrelay_plugins_loaded";
    const CHUNK: usize = 250;
    // Each change is made while a chunk of joins streams in, and has taken effect before the
    // next chunk starts.
    for phase in 0..4 {
        let publisher = redis
            .spawn_paced_joins(
                "m1",
                phase * CHUNK..(phase + 1) * CHUNK,
                Duration::from_millis(2),
            )
            .await;
        // Part of the scenario: the change comes while the chunk streams in.
        tokio::time::sleep(Duration::from_millis(100)).await;
        match phase {
            0 => {
                // Same .wasm, new settings: started again from the compile cache.
                dir.write("10-tag.toml", b"[config]\ntag = \"v2\"\n");
                wait_metric(&relay, recompiled, 1.0).await;
            }
            1 => {
                dir.add("20-x", "testing_tag", Some("[config]\ntag = \"x\"\n"));
                wait_metric(&relay, loaded, 2.0).await;
            }
            2 => {
                // A broken replacement: the previous version of 10-tag goes on.
                dir.write("10-tag.wasm", b"not a component");
                wait_metric(&relay, error, 1.0).await;
            }
            _ => {
                dir.remove("20-x.wasm");
                dir.remove("20-x.toml");
                until("20-x gone", async || {
                    let now = metric_value(&relay.metrics().await, loaded);
                    match now == 1.0 {
                        true => Ok(()),
                        false => Err(format!("{loaded} {now}")),
                    }
                })
                .await;
            }
        }
        publisher.await.expect("publisher");
    }
    // The last ten also serve as markers: a repeated callback would come before them.
    let last: Vec<String> = (4 * CHUNK..4 * CHUNK + 10)
        .map(|i| user_joined("m1", &format!("u{i}"), &format!("user-{i}")))
        .collect();
    redis.publish_all(&last).await;

    let total = 1 + 4 * CHUNK + 10;
    let got: Vec<Value> = r
        .wait_delivered(total)
        .await
        .iter()
        .map(|x| parse(&x.event()))
        .collect();
    assert_eq!(r.received().len(), total, "a callback was repeated");
    // Exactly once each, in bus order.
    let names: Vec<String> = got[1..]
        .iter()
        .map(|e| {
            e["data"]["attributes"]["user"]["name"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    let expected: Vec<String> = (0..4 * CHUNK + 10).map(|i| format!("user-{i}")).collect();
    assert_eq!(names, expected);
    // Every event went through exactly one plugin set, and the sets followed each other.
    let phases = [
        json!(["v1"]),
        json!(["v2"]),
        json!(["v2", "x"]),
        json!(["v2"]),
    ];
    let mut at = 0;
    let mut phase_of = Vec::with_capacity(got.len());
    for e in &got {
        let chain = &e["chain"];
        at = (at..phases.len())
            .find(|p| phases[*p] == *chain)
            .unwrap_or_else(|| panic!("chain {chain} out of order after phase {at}"));
        phase_of.push(at);
    }
    assert_eq!(phase_of[0], 0, "the first event saw the first set");
    assert!(
        phase_of[1 + CHUNK] >= 1,
        "change 1 not in force for the next chunk"
    );
    assert!(
        phase_of[1 + 2 * CHUNK] >= 2,
        "change 2 not in force for the next chunk"
    );
    assert!(
        phase_of[1 + 3 * CHUNK] >= 2,
        "the broken file replaced the running plugin"
    );
    assert!(
        phase_of[total - 10..].iter().all(|p| *p == 3),
        "the removal did not take"
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_plugins_are_cached_across_a_restart() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add("10-tag", "testing_tag", Some("[config]\ntag = \"t\"\n"));
    let relay = start(&redis, &dir).await;
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_plugin_compiles_total{source="compiled"}"#),
        1.0
    );
    assert_eq!(
        metric_value(&m, r#"hookrelay_plugin_compiles_total{source="cache"}"#),
        0.0
    );
    relay.stop().await;
    let cached: Vec<_> = std::fs::read_dir(dir.path().join(".cache"))
        .expect("cache folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(cached[0].extension().is_some_and(|x| x == "cwasm"));
    let written = std::fs::metadata(&cached[0])
        .and_then(|m| m.modified())
        .expect("mtime");

    let relay = start(&redis, &dir).await;
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_plugin_compiles_total{source="cache"}"#),
        1.0
    );
    assert_eq!(
        metric_value(&m, r#"hookrelay_plugin_compiles_total{source="compiled"}"#),
        0.0
    );
    let again = std::fs::metadata(&cached[0])
        .and_then(|m| m.modified())
        .expect("mtime");
    assert_eq!(written, again, "the cached file was written again");
    // The plugin read back from the cache works.
    let r = TestReceiver::start().await;
    relay.create_hook(&r.url("/cb"), "").await;
    redis.publish(&meeting_created("m1", "ext-1")).await;
    assert_eq!(
        parse(&r.wait_delivered(1).await[0].event())["chain"],
        json!(["t"])
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixing_a_plugin_that_never_loaded_clears_its_alarm() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.write("10-tag.toml", b"[config]\ntag = \"fixed\"\n");
    dir.write("10-tag.wasm", b"not a component yet");
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay.create_hook(&r.url("/cb"), "").await;
    // Fail closed: the broken plugin's on_error policy (drop) holds its events back.
    redis.publish(&meeting_created("m1", "ext-1")).await;
    let failed = r#"hookrelay_plugin_failed{plugin="10-tag"}"#;
    let load_failed = r#"hookrelay_plugin_load_failed{plugin="10-tag"}"#;
    let m = wait_metric(&relay, r#"hookrelay_plugin_dropped_total"#, 1.0).await;
    assert_eq!(metric_value(&m, failed), 1.0);
    assert_eq!(metric_value(&m, load_failed), 1.0);

    dir.add("10-tag", "testing_tag", None);
    wait_metric(&relay, "hookrelay_plugins_loaded", 1.0).await;
    redis.publish(&meeting_created("m2", "ext-2")).await;
    let got = r.wait_delivered(1).await;
    let event = parse(&got[0].event());
    assert_eq!(event["chain"], json!(["fixed"]));
    assert_eq!(
        event["data"]["attributes"]["meeting"]["external-meeting-id"],
        "ext-2"
    );
    let m = relay.metrics().await;
    assert!(m.contains(&format!("{failed} 0")), "{m}");
    assert!(m.contains(&format!("{load_failed} 0")), "{m}");
    relay.stop().await;
}

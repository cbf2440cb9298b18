//! A slow plugin costs only the hooks in its scope: its calls run in those hooks' delivery
//! paths, after the durable queue. The test plugin `loop` spins to its deadline on every call
//! (`on_error = "pass"`: the event then goes on unchanged).

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    plugins::{parse, start, wait_metric},
    support::{
        PluginDir, RelayProcess, TestReceiver, TestRedis, check_no_loss, meeting_created,
        metric_value,
        relay::{create_hook, http_client},
        user_joined, user_name,
        wait::{until, until_within},
    },
};

/// `loop` on every event of the hooks whose callback URL starts with `prefix`, `ms` per call,
/// never marked failed.
fn slow_plugin(prefix: &str, ms: u64) -> String {
    format!(
        "on_error = \"pass\"\ntimeout_ms = {ms}\nmax_failures = 1000000\n[scope]\ncallback_prefixes = [\"{prefix}\"]\n"
    )
}

/// The user names delivered to `path`, in arrival order (meeting-created has none: "").
fn names(rx: &TestReceiver, path: &str) -> Vec<String> {
    rx.delivered()
        .iter()
        .filter(|r| r.uri.split('?').next() == Some(path))
        .map(|r| user_name(&r.event()))
        .collect()
}

/// Waits until `path` got `n` callbacks.
async fn wait_names(rx: &TestReceiver, path: &str, n: usize) {
    until(&format!("{n} callbacks to {path}"), async || {
        let got = names(rx, path);
        match got.len() >= n {
            true => Ok(()),
            false => Err(got),
        }
    })
    .await;
}

/// A Redis, a receiver, and a plugin folder holding `loop` as `name`, `ms` a call, on the hooks
/// whose callback URL starts with the receiver's `/slow`.
async fn with_slow_plugin(name: &str, ms: u64) -> (TestRedis, TestReceiver, PluginDir) {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let dir = PluginDir::new();
    dir.add(
        name,
        "testing_loop",
        Some(&slow_plugin(&rx.url("/slow"), ms)),
    );
    (redis, rx, dir)
}

fn expected(n: usize) -> Vec<String> {
    std::iter::once(String::new())
        .chain((0..n).map(|i| format!("user-{i}")))
        .collect()
}

fn joins(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| user_joined("m1", &format!("u{i}"), &format!("user-{i}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_outside_a_slow_plugins_scope_get_their_events_while_its_hooks_lag() {
    let (redis, rx, dir) = with_slow_plugin("50-loop", 50).await;
    let relay = start(&redis, &dir).await;
    relay.create_hook(&rx.url("/free"), "").await;
    let slow = ["/slow1", "/slow2", "/slow3"];
    for path in slow {
        relay.create_hook(&rx.url(path), "").await;
    }
    const N: usize = 20;
    redis.publish(&meeting_created("m1", "ext-1")).await;
    redis.publish_all(&joins(N)).await;

    // The plugin-free hook gets everything in bus order while the slow hooks have barely begun:
    // each of their 3 x 21 calls spins for 50 ms, one at a time (one instance).
    wait_names(&rx, "/free", N + 1).await;
    let slow_then: usize = slow.iter().map(|p| names(&rx, p).len()).sum();
    assert_eq!(names(&rx, "/free"), expected(N));
    assert!(
        slow_then < 3 * (N + 1) / 2,
        "the slow hooks had {slow_then} of {} when the free hook was done",
        3 * (N + 1)
    );
    // The hooks in scope still get every event, in bus order, exactly once.
    rx.wait_delivered(4 * (N + 1)).await;
    for path in slow {
        assert_eq!(names(&rx, path), expected(N), "{path}");
    }
    assert_eq!(rx.delivered().len(), 4 * (N + 1), "a callback was repeated");
    // Every slow call is counted and timed under the plugin's name.
    let m = relay.metrics().await;
    let calls = 3.0 * (N + 1) as f64;
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_plugin_errors_total{plugin="50-loop",kind="timeout"}"#
        ),
        calls
    );
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_plugin_call_seconds_count{plugin="50-loop"}"#
        ),
        calls
    );
    assert!(
        metric_value(&m, r#"hookrelay_plugin_call_seconds_sum{plugin="50-loop"}"#) >= calls * 0.04,
        "each call ran to its 50 ms deadline"
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_during_a_backlog_applies_the_set_in_force_when_each_callback_is_sent() {
    // The slow hook's backlog: 40 calls of 40 ms; `tag` then marks every event of both hooks.
    let (redis, rx, dir) = with_slow_plugin("10-loop", 40).await;
    dir.add("20-tag", "testing_tag", Some("[config]\ntag = \"v1\"\n"));
    let relay = start(&redis, &dir).await;
    relay.create_hook(&rx.url("/fast"), "").await;
    relay.create_hook(&rx.url("/slow"), "").await;
    const N: usize = 40;
    redis.publish(&meeting_created("m1", "ext-1")).await;
    redis.publish_all(&joins(N)).await;
    wait_names(&rx, "/fast", N + 1).await;
    dir.write("20-tag.toml", b"[config]\ntag = \"v2\"\n");
    wait_metric(
        &relay,
        r#"hookrelay_plugin_compiles_total{source="cache"}"#,
        1.0,
    )
    .await;
    rx.wait_delivered(2 * (N + 1)).await;
    let chains = |path: &str| -> Vec<Value> {
        rx.delivered()
            .iter()
            .filter(|r| r.uri.split('?').next() == Some(path))
            .map(|r| parse(&r.event())["chain"].clone())
            .collect()
    };
    assert!(chains("/fast").iter().all(|c| *c == json!(["v1"])));
    // Each callback went through exactly one set: v1 for those sent before the reload, v2 after.
    let slow = chains("/slow");
    assert_eq!(slow.len(), N + 1);
    let first_v2 = slow
        .iter()
        .position(|c| *c == json!(["v2"]))
        .expect("the backlog's later callbacks went through the new set");
    assert!(
        slow[..first_v2].iter().all(|c| *c == json!(["v1"])),
        "{slow:?}"
    );
    assert!(
        slow[first_v2..].iter().all(|c| *c == json!(["v2"])),
        "{slow:?}"
    );
    assert_eq!(names(&rx, "/slow"), expected(N));
    relay.stop().await;
}

#[tokio::test]
async fn kill_9_while_callbacks_wait_for_a_slow_plugin_loses_nothing() {
    let (redis, rx, dir) = with_slow_plugin("50-loop", 20).await;
    let config = format!(
        "max_unacked = 1\n[plugins]\ndir = \"{}\"\ncache_dir = \"{}\"\n",
        dir.path().display(),
        dir.path().join(".cache").display()
    );
    let relay = RelayProcess::start(&redis, &config).await;
    let http = http_client();
    create_hook(&http, relay.api, &rx.url("/free"), "").await;
    create_hook(&http, relay.api, &rx.url("/slow"), "").await;
    const N: usize = 100;
    redis.publish_users(0..N).await;
    // Killed once the free hook has everything and the slow one a part: the rest waits for
    // the plugin in the slow hook's queue.
    let names_at = |path: &str| -> Vec<String> {
        rx.delivered()
            .iter()
            .filter(|r| r.uri.split('?').next() == Some(path))
            .map(|r| user_name(&r.event()))
            .collect()
    };
    until("all at /free and a fifth at /slow", async || {
        let (free, slow) = (names_at("/free").len(), names_at("/slow").len());
        match free >= N && slow >= N / 5 {
            true => Ok(()),
            false => Err(format!("{free} at /free, {slow} at /slow")),
        }
    })
    .await;
    relay.kill9().await;
    let at_kill = names_at("/slow").len();
    assert!(at_kill < N, "the slow hook was done before the kill");
    let relay = RelayProcess::start(&redis, &config).await;
    until_within(
        "all after the restart",
        Duration::from_secs(60),
        async || {
            let got: std::collections::HashSet<String> = names_at("/slow").into_iter().collect();
            match got.len() >= N {
                true => Ok(()),
                false => Err(format!("only {} of {N} after the restart", got.len())),
            }
        },
    )
    .await;
    // Nothing lost, bus order kept, at most the one unacknowledged callback sent again.
    assert!(check_no_loss(&names_at("/slow"), N) <= 1);
    assert_eq!(check_no_loss(&names_at("/free"), N), 0);
    let m = relay.metrics().await;
    assert!(
        metric_value(
            &m,
            r#"hookrelay_plugin_call_seconds_count{plugin="50-loop"}"#
        ) > 0.0
    );
    relay.terminate().await;
}

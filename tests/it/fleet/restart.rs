//! What service managers really do to a fleet: the holder killed and started again within a
//! lease (under its old name and under a new one), a second failure during the takeover,
//! two holders killed one after the other, the store restarted or failed over mid-stream, and
//! a message published at the moment of a kill. Every test counts, per hook, lost, repeated
//! and out-of-order callbacks and the most requests of one hook in flight at once at the
//! receiver. Pass: nothing lost, order kept, one request in flight, repeats within
//! `delivery.max_unacked` (4) and the one in flight, per hook and failure.

use std::time::{Duration, Instant};

use super::{
    FLEET, all_of_at, holder_of, holds_lease, publish_named, wait_delivered_fraction,
    wait_until_holder,
};
use crate::support::{
    RelayProcess, TestReceiver, TestRedis, metric_value,
    process::binary,
    relay::{create_hook, http_client},
    sentinel::{TestSentinel, in_sync},
    wait::until_within,
};

const EVENTS: usize = 3000;
/// Repeats allowed per hook and failure: the unmarked ones and the one in flight.
const REPEATS: usize = 5;

/// A fleet's configuration: [`FLEET`], `more` of `[fleet]` (an instance name, say) and then
/// `store` (a `[store]` section, or nothing).
fn config(more: &str, store: &str) -> String {
    format!("{FLEET}{more}{store}")
}

fn named(name: &str) -> String {
    format!("instance = \"{name}\"\n")
}

/// Four hooks on `rx`, registered through `relay`, seen by every one of `relays`.
async fn four_hooks(rx: &TestReceiver, relays: &[&RelayProcess]) -> Vec<String> {
    let http = http_client();
    let paths: Vec<String> = (0..4).map(|i| format!("/r{i}")).collect();
    for p in &paths {
        create_hook(&http, relays[0].api, &rx.url(p), "").await;
    }
    let what = "every instance sees the hooks";
    until_within(what, Duration::from_secs(10), async || {
        for r in relays {
            let list = r.call("list", "").await;
            if list.matches("<hookID>").count() < paths.len() {
                return Err(list);
            }
        }
        Ok(())
    })
    .await;
    paths
}

/// Checks every hook got every `prefix` event in order, with at most `allowed` repeats
/// and one request in flight at a time; returns the repeats per hook.
async fn every_hook_got_all(
    rx: &TestReceiver,
    paths: &[String],
    prefix: &str,
    n: usize,
    allowed: usize,
) -> Vec<usize> {
    let mut repeats = Vec::new();
    for p in paths {
        repeats.push(all_of_at(rx, Some(p), prefix, n).await);
        assert_eq!(
            rx.max_in_flight(p),
            1,
            "{p}: one callback in flight at a time"
        );
    }
    assert!(
        repeats.iter().all(|r| *r <= allowed),
        "repeats per hook {repeats:?}, at most {allowed} allowed"
    );
    repeats
}

/// The holder killed at about a third of the stream and started again at once (within one
/// lease, as `Restart=always` does), as `restarted_as`. The survivor is paused (SIGSTOP) from
/// the kill until just after the lease runs out, so that the restarted instance finds the lease
/// free first: it must leave it to the survivor, whose kept messages reach back to the holder's
/// place (before, it took it, and the messages between the kill and its start were lost).
async fn holder_restarted_within_a_lease(restarted_as: &str) {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let a = RelayProcess::start(&redis, &config(&named("a"), "")).await;
    wait_until_holder(&a).await;
    let b = RelayProcess::start(&redis, &config(&named("b"), "")).await;
    let paths = four_hooks(&rx, &[&b, &a]).await;

    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, paths.len() * EVENTS / 3).await;
    let killed = Instant::now();
    a.kill9().await;
    b.signal("STOP");
    let again = RelayProcess::start(&redis, &config(restarted_as, "")).await;
    // Part of the scenario: the survivor stays stopped until the lease (1 s) has run out; the
    // restarted instance has been asking for a while.
    tokio::time::sleep(Duration::from_millis(1300).saturating_sub(killed.elapsed())).await;
    b.signal("CONT");
    wait_until_holder(&b).await;
    publishing.await.expect("publisher");
    let repeats = every_hook_got_all(&rx, &paths, "n", EVENTS, REPEATS).await;
    eprintln!("holder restarted within a lease as {restarted_as:?}: repeats {repeats:?}");
    assert!(
        !holds_lease(&again).await,
        "the restarted instance kept nothing from before its start: it must not take the lease"
    );

    // The operator's view: the survivor holds the lease; the restarted instance follows and,
    // having heard every message since its start, can resume where the holder now stands.
    // With nothing kept (the holder's place is past all it heard), a follower is able once it
    // has heard the source whole for `buffer_s` (30 s) since it let its last message go: on a
    // loaded machine that can be most of those 30 s after the stream ended.
    let what = "one follower able to resume";
    let status = until_within(what, Duration::from_secs(40), async || {
        let out = std::process::Command::new(binary())
            .args(["fleet", "status", "--json", "--config"])
            .arg(&b.config)
            .output()
            .expect("hookrelay fleet status");
        assert!(out.status.success(), "{out:?}");
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let able_followers = status["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .filter(|i| i["holder"] == false && i["able"] == true)
            .count();
        match able_followers == 1 {
            true => Ok(status),
            false => Err(status),
        }
    })
    .await;
    assert_eq!(status["lease"]["instance"], "b", "{status}");
    let instances = status["instances"].as_array().expect("instances");
    assert_eq!(instances.len(), 2, "{status}");
    assert_eq!(instances[0]["instance"], "b");
    assert_eq!(instances[0]["holder"], true);
    let source = &instances[1]["sources"][0];
    assert_eq!(source["source"], "default");
    assert_eq!(source["cursor"], "found");
    assert!(source["kept"].as_u64().unwrap_or(0) > 0, "{status}");
    let hooks = status["hooks"].as_array().expect("hooks");
    assert_eq!(hooks.len(), 4);
    assert!(
        hooks.iter().all(|h| h["deliverer"].is_string()),
        "every hook has a deliverer: {status}"
    );
    let text = std::process::Command::new(binary())
        .args(["fleet", "status", "--config"])
        .arg(&b.config)
        .output()
        .expect("hookrelay fleet status");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("fleet lease: b "), "{text}");
    assert!(
        text.contains("can resume where the holder stands"),
        "{text}"
    );

    // The same facts as metrics.
    let m = again.metrics().await;
    assert_eq!(metric_value(&m, "hookrelay_fleet_cursor_reachable"), 1.0);
    assert!(
        metric_value(&m, r#"hookrelay_fleet_kept_messages{source="default"}"#) > 0.0,
        "{m}"
    );
    assert!(metric_value(&m, r#"hookrelay_fleet_kept_seconds{source="default"}"#) > 0.0);
}

#[tokio::test]
async fn the_holder_killed_and_started_again_under_its_name_within_a_lease_loses_nothing() {
    holder_restarted_within_a_lease(&named("a")).await;
}

#[tokio::test]
async fn the_holder_killed_and_started_again_under_a_new_name_within_a_lease_loses_nothing() {
    holder_restarted_within_a_lease("").await;
}

/// Three instances; the holder is killed and started again; the instance that takes over is
/// killed while it takes over (as soon as it holds the lease) and started again too. The
/// third, whose kept messages reach back, takes over; the restarted ones wait.
#[tokio::test]
async fn the_taker_killed_during_its_takeover_loses_nothing() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let a = RelayProcess::start(&redis, &config(&named("a"), "")).await;
    wait_until_holder(&a).await;
    let b = RelayProcess::start(&redis, &config(&named("b"), "")).await;
    let c = RelayProcess::start(&redis, &config(&named("c"), "")).await;
    let paths = four_hooks(&rx, &[&c, &a, &b]).await;

    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, paths.len() * EVENTS / 4).await;
    a.kill9().await;
    let a2 = RelayProcess::start(&redis, &config(&named("a"), "")).await;
    let mut rest = vec![b, c];
    let taker = holder_of(&rest).await;
    let taker_name = if taker == 0 { "b" } else { "c" };
    rest.remove(taker).kill9().await;
    let again = RelayProcess::start(&redis, &config(&named(taker_name), "")).await;
    let third = rest.remove(0);
    wait_until_holder(&third).await;
    publishing.await.expect("publisher");
    let repeats = every_hook_got_all(&rx, &paths, "n", EVENTS, 2 * REPEATS).await;
    eprintln!("taker {taker_name} killed during its takeover: repeats {repeats:?}");
    assert!(!holds_lease(&a2).await && !holds_lease(&again).await);
}

/// Three instances; the holder is killed, then, once the next holder has taken over and
/// delivers, that one is killed too. The last one resumes.
#[tokio::test]
async fn three_instances_lose_nothing_when_two_holders_die_one_after_the_other() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let first = RelayProcess::start(&redis, &config("", "")).await;
    wait_until_holder(&first).await;
    let mut relays = vec![first];
    for _ in 0..2 {
        relays.push(RelayProcess::start(&redis, &config("", "")).await);
    }
    let paths = four_hooks(&rx, &relays.iter().collect::<Vec<_>>()).await;

    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, paths.len() * EVENTS / 4).await;
    relays.remove(0).kill9().await;
    let next = holder_of(&relays).await;
    let delivered = rx.delivered_count();
    wait_delivered_fraction(&rx, delivered + paths.len() * EVENTS / 5).await;
    relays.remove(next).kill9().await;
    wait_until_holder(&relays[0]).await;
    publishing.await.expect("publisher");
    let repeats = every_hook_got_all(&rx, &paths, "n", EVENTS, 2 * REPEATS).await;
    eprintln!("two holders killed one after the other: repeats {repeats:?}");
    assert_eq!(
        metric_value(
            &relays[0].metrics().await,
            "hookrelay_fleet_takeovers_total"
        ),
        1.0
    );
}

/// Plays the service manager for `limit`: starts again, with its configuration, each of
/// `relays` that exits.
async fn supervise(
    relays: &mut [RelayProcess],
    bus: &TestRedis,
    configs: &[String],
    limit: Duration,
) {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for (r, config) in relays.iter_mut().zip(configs) {
            if r.has_exited() {
                let log = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(8).collect();
                eprintln!(
                    "an instance exited (its service manager starts it again); its log ended:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                *r = RelayProcess::start(bus, config).await;
            }
        }
        // Part of the scenario: a service manager's watch, for all of `limit`, not a wait for
        // a condition.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Instances `a` (the holder) and `b` on the bus `bus` and the store of `section`, with four
/// hooks on `rx`: the instances, their configurations and the hooks' paths.
async fn two_on_a_store(
    bus: &TestRedis,
    rx: &TestReceiver,
    section: &str,
) -> (Vec<RelayProcess>, Vec<String>, Vec<String>) {
    let configs = vec![config(&named("a"), section), config(&named("b"), section)];
    let a = RelayProcess::start(bus, &configs[0]).await;
    wait_until_holder(&a).await;
    let b = RelayProcess::start(bus, &configs[1]).await;
    let paths = four_hooks(rx, &[&b, &a]).await;
    (vec![a, b], configs, paths)
}

/// The store (its own `redis-server`, with an append-only file) stopped and started again in
/// the middle of a stream, the bus untouched: the holder, unable to renew, stops; an instance
/// that kept the messages resumes once the store is back.
#[tokio::test]
async fn the_store_restarted_mid_stream_loses_nothing() {
    let bus = TestRedis::start().await;
    let mut store = TestRedis::start_appendonly().await;
    let rx = TestReceiver::start().await;
    let section = format!("[store]\nurl = \"{}\"\n", store.url());
    let (mut relays, configs, paths) = two_on_a_store(&bus, &rx, &section).await;

    let publishing = publish_named(&bus, "n", EVENTS);
    wait_delivered_fraction(&rx, paths.len() * EVENTS / 3).await;
    store.stop().await;
    // Part of the scenario: the store stays down longer than a lease (1 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    store.start_again().await;
    publishing.await.expect("publisher");
    // A holder that lost its lease exits with an error; its service manager starts it again.
    supervise(&mut relays, &bus, &configs, Duration::from_secs(5)).await;
    let repeats = every_hook_got_all(&rx, &paths, "n", EVENTS, REPEATS).await;
    eprintln!("store restarted mid-stream: repeats {repeats:?}");
    holder_of(&relays).await;
}

/// The store behind Sentinel (master, replica, sentinel), the bus apart; the master killed
/// with SIGKILL mid-stream. Each batch waits for the replica (`store.wait_replicas`, 1 with
/// sentinels), so the promoted replica has everything that was handed on.
#[tokio::test]
async fn a_sentinel_failover_of_the_store_mid_stream_loses_nothing() {
    let bus = TestRedis::start().await;
    let mut master = TestRedis::start().await;
    let replica = TestRedis::start_replica_of(&master).await;
    in_sync(&replica).await;
    let sentinel = TestSentinel::start(&master).await;
    let rx = TestReceiver::start().await;
    let (mut relays, configs, paths) = two_on_a_store(&bus, &rx, &sentinel.store_config()).await;

    let publishing = publish_named(&bus, "n", EVENTS);
    wait_delivered_fraction(&rx, paths.len() * EVENTS / 3).await;
    // A holder starved of CPU (a loaded CI machine) may already have lost its lease and
    // stopped, as the scenario allows below: its service manager starts it again first.
    supervise(&mut relays, &bus, &configs, Duration::from_millis(300)).await;
    for r in &relays {
        // One that stopped since (its lease lost on a starved machine) has nothing to say.
        let Ok(reply) = reqwest::get(format!("http://{}/metrics", r.metrics)).await else {
            continue;
        };
        let m = reply.text().await.unwrap_or_default();
        assert_eq!(
            metric_value(&m, "hookrelay_store_unreplicated_writes_total"),
            0.0,
            "every batch reached the replica in time"
        );
    }
    master.kill().await;
    sentinel.wait_master(replica.port).await;
    publishing.await.expect("publisher");
    supervise(&mut relays, &bus, &configs, Duration::from_secs(5)).await;
    let repeats = every_hook_got_all(&rx, &paths, "n", EVENTS, REPEATS).await;
    eprintln!("sentinel failover mid-stream: repeats {repeats:?}");
    // The promoted replica has no replica of its own: the relay says so and goes on. A holder
    // may still lose its lease and exit (its service manager starts it again): ask the one
    // that answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        supervise(&mut relays, &bus, &configs, Duration::from_millis(300)).await;
        let holder = &relays[holder_of(&relays).await];
        let url = format!("http://{}/metrics", holder.metrics);
        if let Ok(reply) = reqwest::get(url).await
            && let Ok(m) = reply.text().await
        {
            assert!(metric_value(&m, "hookrelay_store_unreplicated_writes_total") > 0.0);
            break;
        }
        assert!(Instant::now() < deadline, "no holder answered");
    }
}

/// Nothing flowing, every callback marked; the holder is killed while ten messages are being
/// published around that moment: each arrives once per hook (`max_unacked = 1`: the only
/// repeat can be the callback in flight), in order.
#[tokio::test]
async fn messages_published_at_the_moment_of_a_kill_are_queued_once() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let once = |name: &str| config(&named(name), "").replace("max_unacked = 4", "max_unacked = 1");
    let a = RelayProcess::start(&redis, &once("a")).await;
    wait_until_holder(&a).await;
    let b = RelayProcess::start(&redis, &once("b")).await;
    let paths = four_hooks(&rx, &[&b, &a]).await;
    publish_named(&redis, "w", 20).await.expect("publisher");
    every_hook_got_all(&rx, &paths, "w", 20, 0).await;

    let bus = redis.url();
    let publishing = tokio::spawn(async move {
        let client = redis::Client::open(bus).expect("client");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("conn");
        for i in 0..10 {
            let m = crate::support::user_joined("int-1", &format!("k{i}"), &format!("k{i}"));
            let _: i64 =
                redis::AsyncCommands::publish(&mut conn, "from-akka-apps-redis-channel", m)
                    .await
                    .expect("publish");
            // Part of the scenario: the ten messages spread around the moment of the kill.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    // Part of the scenario: the kill lands while the messages are being published.
    tokio::time::sleep(Duration::from_millis(4)).await;
    a.kill9().await;
    publishing.await.expect("publisher");
    wait_until_holder(&b).await;
    let repeats = every_hook_got_all(&rx, &paths, "k", 10, 1).await;
    eprintln!("published at the moment of a kill: repeats {repeats:?}");
}

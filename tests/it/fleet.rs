//! Several relay instances sharing one store (`[fleet]`): real binaries, one `redis-server`
//! that is both the bus and the store, a real receiver. The instance holding the lease is
//! killed with SIGKILL or stopped with SIGSTOP in the middle of a stream; the other one is
//! killed too. Every event published while an instance was listening arrives, in bus order,
//! and the only repeats are callbacks that were in flight or not yet marked delivered.

mod restart;

use std::time::{Duration, Instant};

use crate::support::{
    RelayProcess, TestReceiver, TestRedis,
    cluster::TestCluster,
    metric_value,
    netns::NetCut,
    relay::{create_hook, http_client},
    user_name,
    wait::until_within,
};

/// Four callbacks may wait to be marked delivered: a takeover repeats at most those and the
/// one in flight.
pub(crate) const FLEET: &str =
    "max_unacked = 4\n[fleet]\nenabled = true\nlease_ms = 1000\nbuffer_s = 30\n";
const EVENTS: usize = 3000;

pub(crate) async fn holds_lease(relay: &RelayProcess) -> bool {
    metric_value(&relay.metrics().await, "hookrelay_fleet_lease_held") == 1.0
}

pub(crate) async fn wait_until_holder(relay: &RelayProcess) {
    until_within("the lease taken", Duration::from_secs(30), async || {
        let held = metric_value(&relay.metrics().await, "hookrelay_fleet_lease_held");
        match held == 1.0 {
            true => Ok(()),
            false => Err(format!("hookrelay_fleet_lease_held {held}")),
        }
    })
    .await;
}

/// Two instances, the first holding the lease, and a hook registered on the second (which the
/// first learns from the store). `extra` is more of `[fleet]`, then perhaps a `[store]`.
async fn two_instances(
    redis: &TestRedis,
    rx: &TestReceiver,
    extra: &str,
) -> (RelayProcess, RelayProcess) {
    let config = format!("{FLEET}{extra}");
    let first = RelayProcess::start(redis, &config).await;
    wait_until_holder(&first).await;
    let second = RelayProcess::start(redis, &config).await;
    let http = http_client();
    create_hook(&http, second.api, &rx.url("/f"), "").await;
    until_within(
        "the holder sees the hook",
        Duration::from_secs(10),
        async || {
            let list = first.call("list", "").await;
            match list.contains("/f") {
                true => Ok(()),
                false => Err(list),
            }
        },
    )
    .await;
    assert!(!holds_lease(&second).await, "one holder at a time");
    (first, second)
}

async fn wait_delivered_fraction(rx: &TestReceiver, part: usize) {
    until_within(
        &format!("{part} delivered"),
        Duration::from_secs(30),
        async || {
            let delivered = rx.delivered_count();
            match delivered >= part {
                true => Ok(()),
                false => Err(delivered),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn killing_the_lease_holder_mid_stream_loses_nothing() {
    kill_the_holder_mid_stream("").await;
}

/// Two instances on `store` (a `[store]` section; empty: the bus's Redis); the holder of the
/// lease is killed in the middle of a stream.
pub(crate) async fn kill_the_holder_mid_stream(store: &str) {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let (holder, other) = two_instances(&redis, &rx, store).await;
    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, EVENTS / 5).await;
    let killed_at = Instant::now();
    holder.kill9().await;
    wait_until_holder(&other).await;
    let failover = killed_at.elapsed();
    publishing.await.expect("publisher");
    let repeats = all_of(&rx, "n", EVENTS).await;
    eprintln!("fleet kill -9 of the holder: took over in {failover:?}, {repeats} repeated");
    assert!(
        repeats <= 5,
        "only callbacks in flight or unmarked repeat: {repeats}"
    );
    let m = other.metrics().await;
    assert_eq!(metric_value(&m, "hookrelay_fleet_takeovers_total"), 1.0);
}

/// `hooks/create` of one URL on two instances at the same moment makes one hook: the other
/// call answers with it as a duplicate. Then destroyed on one, the URL is at once free again
/// on the other.
#[tokio::test]
async fn one_url_created_on_two_instances_at_once_is_one_hook() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let a = RelayProcess::start(&redis, FLEET).await;
    let b = RelayProcess::start(&redis, FLEET).await;
    let http = http_client();
    for round in 0..10 {
        let url = rx.url(&format!("/same{round}"));
        let (on_a, on_b) = tokio::join!(
            create_hook(&http, a.api, &url, ""),
            create_hook(&http, b.api, &url, "")
        );
        assert_eq!(on_a, on_b, "round {round}: one hook for {url}");
    }
    let list = a.call("list", "").await;
    assert_eq!(list.matches("<hookID>").count(), 10, "{list}");

    let id = create_hook(&http, a.api, &rx.url("/again"), "").await;
    let destroyed = a.call("destroy", &format!("hookID={id}")).await;
    assert!(destroyed.contains("<removed>true</removed>"), "{destroyed}");
    until_within("b sees the destroy", Duration::from_secs(10), async || {
        let list = b.call("list", "").await;
        match list.contains("/again") {
            false => Ok(()),
            true => Err(list),
        }
    })
    .await;
    // The destroy freed the URL's claim (else a new create would wait for it to run out).
    let digest =
        hookrelay::base::digest::Algorithm::Sha256.hex_digest(&[rx.url("/again").as_bytes()]);
    let mut conn = redis.conn().await.expect("redis");
    let claimed: bool = redis::cmd("EXISTS")
        .arg(format!("hookrelay:hooks:claim:{digest}"))
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert!(!claimed);
    let again = create_hook(&http, b.api, &rx.url("/again"), "").await;
    assert_ne!(again, id, "a new hook");
}

/// Without spread, the holder of the fleet lease sends everything.
#[tokio::test]
async fn killing_the_other_instance_changes_nothing() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let (holder, other) = two_instances(&redis, &rx, "spread = false\n").await;
    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, EVENTS / 5).await;
    other.kill9().await;
    publishing.await.expect("publisher");
    assert_eq!(all_of(&rx, "n", EVENTS).await, 0);
    assert!(holds_lease(&holder).await);
}

#[tokio::test]
async fn a_stopped_holder_is_replaced_and_stops_when_it_wakes() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let (mut holder, other) = two_instances(&redis, &rx, "").await;
    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, EVENTS / 5).await;
    // SIGSTOP stands for a holder cut off from the network.
    holder.signal("STOP");
    wait_until_holder(&other).await;
    publishing.await.expect("publisher");
    let repeats = all_of(&rx, "n", EVENTS).await;
    holder.signal("CONT");
    let exit = holder.exited_within(Duration::from_secs(10)).await;
    assert!(
        !exit.success(),
        "an instance that lost the lease exits with an error"
    );
    assert!(
        std::fs::read_to_string(&holder.log)
            .unwrap_or_default()
            .contains("fleet lease")
    );
    let after = rx.delivered_count();
    // Proves that nothing happens: the woken instance sends no callback within half a second.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        rx.delivered_count(),
        after,
        "the woken instance sends nothing more"
    );
    assert!(
        repeats <= 5,
        "only callbacks in flight or unmarked repeat: {repeats}"
    );
}

/// Publishes joins named `{prefix}0`, `{prefix}1`, ... on `redis`, 20 every 20 ms.
pub(crate) fn publish_named(
    redis: &TestRedis,
    prefix: &'static str,
    n: usize,
) -> tokio::task::JoinHandle<()> {
    let url = redis.url();
    tokio::spawn(async move {
        let client = redis::Client::open(url).expect("client");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("conn");
        for chunk in (0..n).collect::<Vec<_>>().chunks(20) {
            let mut pipe = redis::pipe();
            for i in chunk {
                let name = format!("{prefix}{i}");
                let m = crate::support::user_joined("int-1", &name, &name);
                pipe.publish("from-akka-apps-redis-channel", m).ignore();
            }
            let () = pipe.query_async(&mut conn).await.expect("publish");
            // Part of the scenario: a stream, 20 events every 20 ms, not one burst.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Waits until `n` names of `prefix` arrived; checks they came in order with nothing lost;
/// returns how many were repeats.
async fn all_of(rx: &TestReceiver, prefix: &str, n: usize) -> usize {
    all_of_at(rx, None, prefix, n).await
}

/// [`all_of`] for the callbacks to `path` only (any path: `None`).
pub(crate) async fn all_of_at(
    rx: &TestReceiver,
    path: Option<&str>,
    prefix: &str,
    n: usize,
) -> usize {
    let what = format!("{prefix} at {path:?}: all {n} delivered");
    let names = until_within(&what, Duration::from_secs(60), async || {
        let names: Vec<String> = rx
            .delivered()
            .iter()
            .filter(|r| path.is_none_or(|p| r.uri.split('?').next() == Some(p)))
            .map(|r| user_name(&r.event()))
            .filter(|name| {
                name.strip_prefix(prefix)
                    .is_some_and(|rest| rest.parse::<usize>().is_ok())
            })
            .collect();
        let distinct = names.iter().collect::<std::collections::HashSet<_>>().len();
        match distinct >= n {
            true => Ok(names),
            false => Err(format!("only {distinct} of {n} delivered")),
        }
    })
    .await;
    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<&String> = names.iter().filter(|m| seen.insert(m.as_str())).collect();
    let want: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    assert!(
        firsts.iter().zip(&want).all(|(a, b)| *a == b),
        "{prefix} at {path:?}: bus order kept"
    );
    names.len() - firsts.len()
}

/// [`all_of_at`] at each of `paths`: the repeats at each.
async fn repeats_at_each(
    rx: &TestReceiver,
    paths: &[String],
    prefix: &str,
    n: usize,
) -> Vec<usize> {
    let mut repeats = Vec::new();
    for p in paths {
        repeats.push(all_of_at(rx, Some(p), prefix, n).await);
    }
    repeats
}

/// The instance of `relays` that holds the lease, once one does.
pub(crate) async fn holder_of(relays: &[RelayProcess]) -> usize {
    until_within(
        "someone takes the lease",
        Duration::from_secs(30),
        async || {
            // A relay that does not answer (it stopped and is being started again) holds
            // no lease.
            for (i, r) in relays.iter().enumerate() {
                if let Ok(m) = r.try_metrics().await
                    && metric_value(&m, "hookrelay_fleet_lease_held") == 1.0
                {
                    return Ok(i);
                }
            }
            Err("nobody took the lease")
        },
    )
    .await
}

#[tokio::test]
async fn three_instances_two_sources_a_killed_instance_and_a_lost_source() {
    let store = TestRedis::start().await;
    three_instances_two_sources(&format!("[store]\nurl = \"{}\"\n", store.url())).await;
}

/// Three instances on `store` (a `[store]` section) and two sources; the holder is killed,
/// then one source is lost and comes back.
pub(crate) async fn three_instances_two_sources(store: &str) {
    let a = TestRedis::start().await;
    let mut b = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let extra = format!(
        "{FLEET}{store}[[sources]]\nname = \"a\"\nurl = \"{}\"\n[[sources]]\nname = \"b\"\nurl = \"{}\"\n",
        a.url(),
        b.url()
    );
    let first = RelayProcess::start(&a, &extra).await;
    wait_until_holder(&first).await;
    let mut relays = vec![first];
    for _ in 0..2 {
        relays.push(RelayProcess::start(&a, &extra).await);
    }
    b.wait_for_subscriber().await;
    let http = http_client();
    create_hook(&http, relays[2].api, &rx.url("/f"), "").await;
    until_within(
        "the holder sees the hook",
        Duration::from_secs(10),
        async || {
            let list = relays[0].call("list", "").await;
            match list.contains("/f") {
                true => Ok(()),
                false => Err(list),
            }
        },
    )
    .await;

    // Both servers publish; the holder is killed mid-stream.
    let from_a = publish_named(&a, "a", 1500);
    let from_b = publish_named(&b, "b", 1500);
    wait_delivered_fraction(&rx, 600).await;
    relays.remove(0).kill9().await;
    let holder = holder_of(&relays).await;
    from_a.await.expect("publisher a");
    from_b.await.expect("publisher b");
    let repeats = all_of(&rx, "a", 1500).await + all_of(&rx, "b", 1500).await;
    assert!(
        repeats <= 5,
        "only callbacks in flight or unmarked repeat: {repeats}"
    );

    // Server b's Redis goes away: a's events keep coming; b's come again once it is back.
    b.kill().await;
    publish_named(&a, "c", 200).await.expect("publisher");
    assert_eq!(all_of(&rx, "c", 200).await, 0);
    b.start_again().await;
    let connected = r#"hookrelay_redis_connected{source="b"}"#;
    until_within(
        "subscribed to b again",
        Duration::from_secs(30),
        async || {
            let m = relays[holder].metrics().await;
            match metric_value(&m, connected) == 1.0 {
                true => Ok(()),
                false => Err(m),
            }
        },
    )
    .await;
    publish_named(&b, "d", 200).await.expect("publisher");
    assert_eq!(all_of(&rx, "d", 200).await, 0);
}

async fn hooks_held(relay: &RelayProcess) -> f64 {
    metric_value(&relay.metrics().await, "hookrelay_fleet_hooks_held")
}

/// Waits until the instances deliver `want[i]` hooks each (in any order).
pub(crate) async fn wait_spread(relays: &[&RelayProcess], want: &[f64]) {
    let what = format!("delivery spread as {want:?}");
    until_within(&what, Duration::from_secs(30), async || {
        let mut held = Vec::new();
        for r in relays {
            held.push(hooks_held(r).await);
        }
        held.sort_by(f64::total_cmp);
        match held == want {
            true => Ok(()),
            false => Err(held),
        }
    })
    .await;
}

#[tokio::test]
async fn delivery_spreads_and_a_killed_instances_hooks_move_and_come_back_balanced() {
    spread_kill_and_join(None).await;
}

/// Three instances on the bus's Redis or on `cluster` share six hooks; one is killed
/// mid-stream, another joins, and it leaves with SIGTERM.
pub(crate) async fn spread_kill_and_join(cluster: Option<&TestCluster>) {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let config = format!(
        "{FLEET}{}",
        cluster.map(TestCluster::store_config).unwrap_or_default()
    );
    let first = RelayProcess::start(&redis, &config).await;
    wait_until_holder(&first).await;
    let mut relays = vec![first];
    for _ in 0..2 {
        relays.push(RelayProcess::start(&redis, &config).await);
    }
    let http = http_client();
    let paths: Vec<String> = (0..6).map(|i| format!("/h{i}")).collect();
    for p in &paths {
        create_hook(&http, relays[1].api, &rx.url(p), "").await;
    }
    wait_spread(&relays.iter().collect::<Vec<_>>(), &[2.0, 2.0, 2.0]).await;

    // Every instance sends its share.
    publish_named(&redis, "s", 60).await.expect("publisher");
    for p in &paths {
        assert_eq!(all_of_at(&rx, Some(p), "s", 60).await, 0);
    }
    for r in &relays {
        let sent = metric_value(
            &r.metrics().await,
            r#"hookrelay_callbacks_delivered_total{tenant=""}"#,
        );
        assert_eq!(sent, 120.0, "two hooks' callbacks from each instance");
    }

    // One that only delivers is killed mid-stream: its hooks move, nothing is lost.
    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, 6 * 60 + 6 * EVENTS / 5).await;
    let victim = if holds_lease(&relays[1]).await { 2 } else { 1 };
    relays.remove(victim).kill9().await;
    wait_spread(&relays.iter().collect::<Vec<_>>(), &[3.0, 3.0]).await;
    publishing.await.expect("publisher");
    let repeats = repeats_at_each(&rx, &paths, "n", EVENTS).await;
    eprintln!("fleet spread, a deliverer killed: repeats per hook {repeats:?}");
    assert!(
        repeats.iter().all(|r| *r <= 5) && repeats.iter().filter(|r| **r > 0).count() <= 2,
        "only the killed instance's callbacks in flight or unmarked repeat: {repeats:?}"
    );

    // A new instance joins mid-stream: the others give it their extras, and nothing repeats.
    let publishing = publish_named(&redis, "j", 1000);
    let named = format!(
        "{FLEET}instance = \"leaver\"\n{}",
        cluster.map(TestCluster::store_config).unwrap_or_default()
    );
    relays.push(RelayProcess::start(&redis, &named).await);
    wait_spread(&relays.iter().collect::<Vec<_>>(), &[2.0, 2.0, 2.0]).await;
    publishing.await.expect("publisher");
    for p in &paths {
        // Given up to balance: nothing repeats, unless a round came late enough for a lease to
        // run out (a loaded machine, with leases of one second): then as after a crash.
        let repeats = all_of_at(&rx, Some(p), "j", 1000).await;
        assert!(repeats <= 5, "{p}: {repeats}");
    }
    let m = relays[2].metrics().await;
    assert_eq!(
        metric_value(&m, "hookrelay_fleet_hook_leases_taken_total"),
        2.0
    );
    assert_eq!(metric_value(&m, "hookrelay_fleet_instances"), 3.0);

    // A clean stop (SIGTERM) of an instance that does not queue gives its leases up at once
    // and leaves the fleet, so that the others need not wait for them to run out.
    relays.remove(2).terminate().await;
    let mut owners: Vec<Option<String>> = Vec::new();
    for i in 1..=6 {
        let get = redis::cmd("GET")
            .arg(format!("{{bigbluebutton:webhooks:out:hook:{i}}}:lease"))
            .clone();
        owners.push(store_query(&redis, cluster, get).await);
    }
    assert!(
        !owners.iter().flatten().any(|o| o == "leaver"),
        "{owners:?}"
    );
    let zscore = redis::cmd("ZSCORE")
        .arg("hookrelay:fleet:members")
        .arg("leaver")
        .clone();
    let member: Option<f64> = store_query(&redis, cluster, zscore).await;
    assert_eq!(member, None, "it left the fleet");
}

/// `cmd`'s answer from the store: `cluster`, or else `redis`.
pub(crate) async fn store_query<T: redis::FromRedisValue>(
    redis: &TestRedis,
    cluster: Option<&TestCluster>,
    cmd: redis::Cmd,
) -> T {
    match cluster {
        Some(c) => cmd.query_async(&mut c.conn().await).await,
        None => {
            cmd.query_async(&mut redis.conn().await.expect("redis"))
                .await
        }
    }
    .expect("store query")
}

/// One of three instances, one that only delivers, is cut off the network (its network
/// namespace's link goes down; where namespaces cannot be made, SIGSTOP stands for the cut) in
/// the middle of a stream: the others take its hooks, nothing is lost. When it is back, it finds
/// its leases gone, sends nothing for them, and takes its share again.
#[tokio::test]
async fn a_deliverer_cut_off_the_network_loses_its_hooks_and_takes_its_share_again() {
    let net = NetCut::create();
    if net.is_none() {
        eprintln!("no network namespaces here: SIGSTOP stands for the cut");
    }
    let redis = match &net {
        Some(net) => TestRedis::start_also_on(&net.host_ip).await,
        None => TestRedis::start().await,
    };
    let host = net.as_ref().map_or("127.0.0.1", |n| n.host_ip.as_str());
    let rx = TestReceiver::start_on("0.0.0.0").await;
    let url = format!("redis://{host}:{}", redis.port);
    let extra =
        format!("{FLEET}[store]\nurl = \"{url}\"\n[[sources]]\nname = \"bbb\"\nurl = \"{url}\"\n");
    let first = RelayProcess::start(&redis, &extra).await;
    wait_until_holder(&first).await;
    let second = RelayProcess::start(&redis, &extra).await;
    let third = match &net {
        Some(net) => RelayProcess::start_in_netns(&redis, &extra, net).await,
        None => RelayProcess::start(&redis, &extra).await,
    };
    let cut = |off: bool| match &net {
        Some(net) => net.cut(off),
        None => third.signal(if off { "STOP" } else { "CONT" }),
    };
    let http = http_client();
    let paths: Vec<String> = (0..6).map(|i| format!("/h{i}")).collect();
    for p in &paths {
        let callback = format!("http://{host}:{}{p}", rx.addr.port());
        create_hook(&http, first.api, &callback, "").await;
    }
    wait_spread(&[&first, &second, &third], &[2.0, 2.0, 2.0]).await;

    let publishing = publish_named(&redis, "n", EVENTS);
    wait_delivered_fraction(&rx, 6 * EVENTS / 5).await;
    cut(true);
    wait_spread(&[&first, &second], &[3.0, 3.0]).await;
    publishing.await.expect("publisher");
    let repeats = repeats_at_each(&rx, &paths, "n", EVENTS).await;
    eprintln!("fleet spread, a deliverer cut off: repeats per hook {repeats:?}");
    assert!(
        repeats.iter().all(|r| *r <= 5),
        "only callbacks in flight or unmarked repeat: {repeats:?}"
    );

    cut(false);
    let what = "the cut instance sees its leases gone";
    until_within(what, Duration::from_secs(30), async || {
        let lost = metric_value(
            &third.metrics().await,
            "hookrelay_fleet_hook_leases_lost_total",
        );
        match lost == 2.0 {
            true => Ok(()),
            false => Err(lost),
        }
    })
    .await;
    wait_spread(&[&first, &second, &third], &[2.0, 2.0, 2.0]).await;
    publish_named(&redis, "r", 300).await.expect("publisher");
    for p in &paths {
        // As above: none repeat unless a lease ran out on a loaded machine.
        let repeats = all_of_at(&rx, Some(p), "r", 300).await;
        assert!(repeats <= 5, "{p}: {repeats}");
        // What it held in memory when cut off went with its leases.
        let again = all_of_at(&rx, Some(p), "n", EVENTS).await;
        assert!(
            again <= 5,
            "{p}: the instance back sent its old callbacks again: {again}"
        );
    }
    assert!(
        holds_lease(&first).await,
        "the queue writer was never cut off"
    );
}

//! The store on a Redis Cluster of three primaries started by the test (`redis-server
//! --cluster-enabled yes`, joined by `redis-cli --cluster create`), the bus on a Redis of its
//! own: hooks, queues and a kill -9 with callbacks waiting on one relay, then the fleet suite
//! (a killed lease holder; delivery spread, a killed deliverer and a newcomer; three instances
//! and two sources) run again on the cluster.

use std::time::Duration;

use crate::{
    fleet,
    support::{
        RelayProcess, TestReceiver, TestRedis,
        cluster::TestCluster,
        metric_value,
        receiver::Reply,
        relay::{create_hook, http_client},
        wait::until_within,
    },
};

const EVENTS: usize = 300;

/// Whether the newest entry of hook `id`'s queue is the join of `name`, or the queue is empty.
async fn queued_up_to(cluster: &TestCluster, id: u64, name: &str) -> bool {
    let mut conn = cluster.conn().await;
    let last: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(queue_key(id))
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await
        .expect("XREVRANGE");
    last.ids.first().is_some_and(|e| {
        let payload: String = e.get("p").unwrap_or_default();
        payload.contains(&format!("\"name\":\"{name}\""))
    })
}

#[tokio::test]
async fn hooks_and_queues_live_on_the_cluster_and_survive_a_kill() {
    let cluster = TestCluster::start().await;
    let bus = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let config = format!("max_unacked = 4\n{}", cluster.store_config());
    let relay = RelayProcess::start(&bus, &config).await;
    let http = http_client();
    let paths: Vec<String> = (0..6).map(|i| format!("/c{i}")).collect();
    let mut ids = Vec::new();
    for p in &paths {
        ids.push(create_hook(&http, relay.api, &rx.url(p), "").await);
    }
    assert_eq!(ids, (1..=6).collect::<Vec<u64>>());
    // Ids 1 to 6 and the index hash to slots of each of the three primaries.
    let per_node = cluster.keys_per_node().await;
    assert!(
        per_node.iter().all(|n| *n > 0),
        "keys per node: {per_node:?}"
    );

    // Each hook's hash, queue and delivery lease hash to one slot, so live on one shard.
    let mut conn = cluster.conn().await;
    for id in &ids {
        let mut slots = Vec::new();
        for key in [
            format!("bigbluebutton:webhooks:out:hook:{id}"),
            format!("{{bigbluebutton:webhooks:out:hook:{id}}}:queue"),
            format!("{{bigbluebutton:webhooks:out:hook:{id}}}:lease"),
        ] {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("CLUSTER KEYSLOT");
            slots.push(slot);
        }
        assert!(
            slots.windows(2).all(|w| w[0] == w[1]),
            "hook {id}: {slots:?}"
        );
    }

    // A slow receiver: callbacks wait in the queues when the relay is killed.
    rx.set_default(Reply::Delay(Duration::from_millis(20), 200));
    fleet::publish_named(&bus, "k", EVENTS)
        .await
        .expect("publisher");
    let last = format!("k{}", EVENTS - 1);
    let what = format!("every stream got {last}");
    until_within(&what, Duration::from_secs(30), async || {
        for id in &ids {
            if !queued_up_to(&cluster, *id, &last).await {
                return Err(format!("hook {id}: not up to {last}"));
            }
        }
        Ok(())
    })
    .await;
    relay.kill9().await;
    let waiting = rx.delivered_count();
    assert!(
        waiting < 6 * EVENTS,
        "the kill came too late: {waiting} sent"
    );

    rx.set_default(Reply::Status(200));
    let relay = RelayProcess::start(&bus, &config).await;
    for p in &paths {
        let repeats = fleet::all_of_at(&rx, Some(p), "k", EVENTS).await;
        assert!(
            repeats <= 5,
            "{p}: only unmarked callbacks repeat: {repeats}"
        );
    }
    // The API reads and writes the hooks on the cluster: a destroyed hook and its queue go.
    let list = relay.call("list", "").await;
    assert!(paths.iter().all(|p| list.contains(p.as_str())), "{list}");
    let destroyed = relay.call("destroy", "hookID=3").await;
    assert!(destroyed.contains("<removed>true</removed>"), "{destroyed}");
    let mut conn = cluster.conn().await;
    for key in [
        "bigbluebutton:webhooks:out:hook:3",
        "{bigbluebutton:webhooks:out:hook:3}:queue",
        "{bigbluebutton:webhooks:out:hook:3}:cursor",
    ] {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("EXISTS");
        assert!(!exists, "{key} is gone");
    }
    let member: bool = redis::cmd("SISMEMBER")
        .arg("bigbluebutton:webhooks:out:hooks")
        .arg(3)
        .query_async(&mut conn)
        .await
        .expect("SISMEMBER");
    assert!(!member);
    let next = create_hook(&http, relay.api, &rx.url("/new"), "").await;
    assert_eq!(next, 7, "ids go on from the cluster's counter");
}

#[tokio::test]
async fn on_a_cluster_killing_the_lease_holder_mid_stream_loses_nothing() {
    let cluster = TestCluster::start().await;
    fleet::kill_the_holder_mid_stream(&cluster.store_config()).await;
}

#[tokio::test]
async fn on_a_cluster_delivery_spreads_and_a_killed_instances_hooks_move() {
    let cluster = TestCluster::start().await;
    fleet::spread_kill_and_join(Some(&cluster)).await;
}

#[tokio::test]
async fn on_a_cluster_three_instances_two_sources_a_killed_instance_and_a_lost_source() {
    let cluster = TestCluster::start().await;
    fleet::three_instances_two_sources(&cluster.store_config()).await;
}

#[tokio::test]
async fn on_a_cluster_queues_named_by_an_earlier_version_move_across_slots() {
    let cluster = TestCluster::start().await;
    crate::upgrade::queues_of_an_earlier_version(Some(&cluster), 1).await;
}

/// `hookrelay import-reference` works on the store the relay uses: a reference 2.x hook left
/// on the cluster is imported there, not into the bus's Redis.
#[tokio::test]
async fn import_reference_reads_and_writes_the_cluster() {
    let cluster = TestCluster::start().await;
    let bus = TestRedis::start().await;
    let mut conn = cluster.conn().await;
    let () = redis::cmd("HSET")
        .arg("bigbluebutton:webhooks:hook:7")
        .arg("hookID")
        .arg("7")
        .arg("callbackURL")
        .arg("http://127.0.0.1:9/v2")
        .query_async(&mut conn)
        .await
        .expect("HSET");
    let () = redis::cmd("SADD")
        .arg("bigbluebutton:webhooks:hooks")
        .arg("7")
        .query_async(&mut conn)
        .await
        .expect("SADD");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("hookrelay.toml");
    // No relay answers at api.bind.
    let nobody = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::free_port()));
    std::fs::write(
        &cfg,
        format!(
            "[bbb]\nsecret = \"{}\"\n[api]\nbind = \"{nobody}\"\n[redis]\nurl = \"{}\"\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n{}",
            crate::support::SECRET,
            bus.url(),
            cluster.store_config()
        ),
    )
    .expect("config");
    let (code, out, err) = crate::cli::run(
        &["import-reference", "-c", cfg.to_str().expect("path")],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("2.x hook 7: http://127.0.0.1:9/v2: imported as hook 1"),
        "{out}"
    );
    let url: Option<String> = redis::cmd("HGET")
        .arg("bigbluebutton:webhooks:out:hook:1")
        .arg("callbackURL")
        .query_async(&mut conn)
        .await
        .expect("HGET");
    assert_eq!(url.as_deref(), Some("http://127.0.0.1:9/v2"));
    let exists = async |conn: &mut redis::cluster_async::ClusterConnection| -> bool {
        redis::cmd("EXISTS")
            .arg("bigbluebutton:webhooks:hook:7")
            .query_async(conn)
            .await
            .expect("EXISTS")
    };
    assert!(
        exists(&mut conn).await,
        "the reference's record stays until the switch is final"
    );
    let (code, out, err) = crate::cli::run(
        &[
            "import-reference",
            "--finish",
            "-c",
            cfg.to_str().expect("path"),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 1 of its records removed"), "{out}");
    assert!(
        !exists(&mut conn).await,
        "the reference's record goes once final"
    );
    let mut on_bus = bus.conn().await.expect("bus");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut on_bus)
        .await
        .expect("KEYS");
    assert!(
        keys.is_empty(),
        "nothing written to the bus's Redis: {keys:?}"
    );
}

#[tokio::test]
async fn on_a_cluster_a_fleet_moves_the_queues_of_an_earlier_version() {
    let cluster = TestCluster::start().await;
    crate::upgrade::queues_of_an_earlier_version(Some(&cluster), 2).await;
}

/// The holder dies after some of the cluster's slots took a batch's callbacks and before the
/// cursor moved past it: the cursor's node holds writes back (`CLIENT PAUSE`), the holder is
/// killed (what it sent there is never executed), the node goes on. The instance taking over reads the batch marks written beside the callbacks
/// and does not queue them again: every hook gets every event exactly once, in bus order.
#[tokio::test]
async fn on_a_cluster_a_holder_killed_between_its_queues_and_its_cursor_repeats_nothing() {
    let cluster = TestCluster::start().await;
    let bus = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let config = format!("{}{}", fleet::FLEET, cluster.store_config());
    let holder = RelayProcess::start(&bus, &config).await;
    fleet::wait_until_holder(&holder).await;
    let other = RelayProcess::start(&bus, &config).await;
    let http = http_client();
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(create_hook(&http, other.api, &rx.url(&format!("/h{i}")), "").await);
    }
    until_within(
        "the holder sees the hooks",
        Duration::from_secs(10),
        async || {
            let list = holder.call("list", "").await;
            match list.contains("/h5") {
                true => Ok(()),
                false => Err(list),
            }
        },
    )
    .await;
    const FIRST: usize = 40;
    bus.publish_users(0..FIRST).await;
    let mut homes = Vec::new();
    for id in &ids {
        let home = cluster
            .node_of(&format!("bigbluebutton:webhooks:out:hook:{id}"))
            .await
            .expect("each hook lives on a node");
        homes.push(home);
    }
    // Everything so far delivered and marked so: no callback is in flight.
    until_within("the first part out", Duration::from_secs(30), async || {
        let delivered = rx.delivered_count();
        let mut waiting = delivered < FIRST * ids.len();
        let mut queued = Vec::new();
        for (id, home) in ids.iter().zip(&homes) {
            let len = cluster.queued_on(*home, *id).await;
            waiting |= len > 0;
            queued.push(len);
        }
        match waiting {
            false => Ok(()),
            true => Err(format!("{delivered} delivered, queued {queued:?}")),
        }
    })
    .await;
    let paused = cluster
        .node_of("hookrelay:{src:default}:cursor")
        .await
        .expect("the cursor is written");
    let elsewhere: Vec<(u64, usize)> = ids
        .iter()
        .zip(&homes)
        .filter(|(_, home)| **home != paused)
        .map(|(id, home)| (*id, *home))
        .collect();
    assert!(
        !elsewhere.is_empty(),
        "some hooks live off the cursor's node"
    );
    // Writes only: the nodes go on talking, and what the holder sent it waits, unexecuted.
    cluster.pause_writes(paused, true).await;
    bus.publish_users(FIRST..FIRST + 20).await;
    // Some of the holder's parts for the other nodes are written, its cursor not.
    until_within(
        "the holder queued the batch",
        Duration::from_secs(30),
        async || {
            for (id, home) in &elsewhere {
                if cluster.queued_on(*home, *id).await > 0 {
                    return Ok(());
                }
            }
            Err("nothing queued off the cursor's node")
        },
    )
    .await;
    holder.kill9().await;
    cluster.pause_writes(paused, false).await;
    fleet::wait_until_holder(&other).await;
    for i in 0..ids.len() {
        let path = format!("/h{i}");
        let repeats = fleet::all_of_at(&rx, Some(&path), "n", FIRST + 20).await;
        assert_eq!(repeats, 0, "callbacks to {path} sent again");
    }
    let m = other.metrics().await;
    assert!(metric_value(&m, "hookrelay_fleet_requeues_avoided_total") > 0.0);
}

fn queue_key(id: u64) -> String {
    format!("{{bigbluebutton:webhooks:out:hook:{id}}}:queue")
}

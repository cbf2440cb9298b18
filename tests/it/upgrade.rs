//! A store written by an earlier version: the hooks' queues under their former names
//! (`bigbluebutton:webhooks:out:queue:<id>`) are moved to the current ones (in the slot of the
//! hook's hash) and delivered once each, in bus order: a stream renamed whole, one merged with
//! the stream already under the new name (an entry under both, two entries with one id), on a
//! single Redis and on a Redis Cluster (across slots); in a fleet that spreads delivery, moved
//! at start, and merged by the next holder of the fleet lease while the hooks' deliverers run.

use std::time::Duration;

use crate::{
    fleet::{FLEET, store_query},
    support::{
        RelayProcess, TestReceiver, TestRedis,
        cluster::TestCluster,
        receiver::Reply,
        relay::{create_hook, http_client},
        wait::until_within,
    },
};

const N: usize = 40;

fn queue(id: u64) -> String {
    format!("{{bigbluebutton:webhooks:out:hook:{id}}}:queue")
}

fn former(id: u64) -> String {
    format!("bigbluebutton:webhooks:out:queue:{id}")
}

/// A stream's entries: id and fields.
async fn entries(
    bus: &TestRedis,
    cluster: Option<&TestCluster>,
    key: &str,
) -> Vec<(String, Vec<(String, Vec<u8>)>)> {
    let reply: redis::streams::StreamRangeReply = store_query(
        bus,
        cluster,
        redis::cmd("XRANGE").arg(key).arg("-").arg("+").clone(),
    )
    .await;
    reply
        .ids
        .iter()
        .map(|sid| {
            let fields = sid
                .map
                .keys()
                .map(|f| (f.clone(), sid.get::<Vec<u8>>(f).expect("a field's value")))
                .collect();
            (sid.id.clone(), fields)
        })
        .collect()
}

async fn xadd(
    bus: &TestRedis,
    cluster: Option<&TestCluster>,
    key: &str,
    id: &str,
    fields: &[(String, Vec<u8>)],
) {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(key).arg(id);
    for (f, v) in fields {
        cmd.arg(f).arg(v.as_slice());
    }
    let _: String = store_query(bus, cluster, cmd).await;
}

async fn exists(bus: &TestRedis, cluster: Option<&TestCluster>, key: &str) -> bool {
    store_query(bus, cluster, redis::cmd("EXISTS").arg(key).clone()).await
}

/// The streams of `hooks` under their former names are gone, and no rebuild is left behind.
async fn assert_moved(bus: &TestRedis, cluster: Option<&TestCluster>, hooks: &[u64]) {
    for &id in hooks {
        assert!(
            !exists(bus, cluster, &former(id)).await,
            "{} is gone",
            former(id)
        );
        assert!(!exists(bus, cluster, &format!("{}:rebuild", queue(id))).await);
    }
}

/// Entries kept aside for a later write under the former names.
type Kept = Vec<(String, Vec<(String, Vec<u8>)>)>;

/// Two hooks' callbacks wait in their streams (their receiver fails) when the relay stops;
/// their streams are then put under the former names as an earlier version would have left
/// them; `instances` relays started on that store deliver each callback once, in order. With
/// several, a last part is then written under the former names while they run, as an instance
/// of the earlier version holding the fleet lease would, and moved by the next holder of the
/// fleet lease; delivered once too.
pub(crate) async fn queues_of_an_earlier_version(cluster: Option<&TestCluster>, instances: usize) {
    let bus = TestRedis::start().await;
    let store = cluster.map(TestCluster::store_config).unwrap_or_default();
    let (config, later) = if instances > 1 {
        (format!("{FLEET}{store}"), 10)
    } else {
        (format!("max_unacked = 1\n{store}"), 0)
    };
    let total = N + later;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Status(503));
    let relay = RelayProcess::start(&bus, &config).await;
    let http = http_client();
    let whole = create_hook(&http, relay.api, &rx.url("/whole"), "").await;
    let split = create_hook(&http, relay.api, &rx.url("/split"), "").await;
    bus.publish_users(0..total).await;
    let what = format!("both hooks queued {total}");
    until_within(&what, Duration::from_secs(30), async || {
        for id in [whole, split] {
            let len = entries(&bus, cluster, &queue(id)).await.len();
            if len < total {
                return Err(format!("hook {id}: {len} queued"));
            }
        }
        Ok(())
    })
    .await;
    relay.terminate().await;
    assert_eq!(rx.delivered_count(), 0);

    // `later` entries from the middle of each stream are kept aside.
    let aside_from = 10;
    let mut kept: Vec<(u64, Kept)> = Vec::new();
    for id in [whole, split] {
        let stream = entries(&bus, cluster, &queue(id)).await;
        let mut aside = Vec::new();
        for (sid, fields) in &stream[aside_from..aside_from + later] {
            let _: i64 = store_query(
                &bus,
                cluster,
                redis::cmd("XDEL").arg(queue(id)).arg(sid).clone(),
            )
            .await;
            aside.push((sid.clone(), fields.clone()));
        }
        kept.push((id, aside));
    }
    // `whole` (in a fleet `split` too): its stream under the former name only. A fleet's
    // instances merge nothing before one holds the fleet lease, while the others may deliver
    // already: a hook with entries under both names there is a fleet of two versions, where
    // order is not kept (below).
    let only_former: &[u64] = if instances > 1 {
        &[whole, split]
    } else {
        &[whole]
    };
    for &hook in only_former {
        let stream = entries(&bus, cluster, &queue(hook)).await;
        assert_eq!(stream.len(), N);
        for (id, fields) in &stream {
            xadd(&bus, cluster, &former(hook), id, fields).await;
        }
        let _: i64 = store_query(&bus, cluster, redis::cmd("DEL").arg(queue(hook)).clone()).await;
    }
    // `split` (one relay): the odd entries under the former name, and the first under both
    // names; the fourth under the third's id there.
    if instances == 1 {
        let stream = entries(&bus, cluster, &queue(split)).await;
        xadd(&bus, cluster, &former(split), &stream[0].0, &stream[0].1).await;
        for i in (1..N).step_by(2) {
            let id = if i == 3 { &stream[2].0 } else { &stream[i].0 };
            xadd(&bus, cluster, &former(split), id, &stream[i].1).await;
            let _: i64 = store_query(
                &bus,
                cluster,
                redis::cmd("XDEL")
                    .arg(queue(split))
                    .arg(&stream[i].0)
                    .clone(),
            )
            .await;
        }
    }
    // A key of that prefix that names no hook is not the relay's: it stays.
    let _: () = store_query(
        &bus,
        cluster,
        redis::cmd("SET")
            .arg("bigbluebutton:webhooks:out:queue:notes")
            .arg("x")
            .clone(),
    )
    .await;

    rx.set_default(Reply::Status(200));
    let mut relays = Vec::new();
    for _ in 0..instances {
        relays.push(RelayProcess::start(&bus, &config).await);
    }
    let name = |i: usize| format!("n{i}");
    let mut want: Vec<String> = (0..aside_from)
        .chain(aside_from + later..total)
        .map(name)
        .collect();
    all_once_in_order(&rx, &want).await;
    assert_moved(&bus, cluster, &[whole, split]).await;
    assert!(exists(&bus, cluster, "bigbluebutton:webhooks:out:queue:notes").await);

    if later > 0 {
        // Entries under the former names again, older than what was delivered, as an instance
        // of the earlier version holding the fleet lease would have written them; then the
        // holder stops. The next holder merges them; the hooks' deliverers, further on than
        // these ids, read them once their delivery leases were set aside (the surviving
        // instance delivered one of the hooks, and keeps it).
        let all: Vec<&RelayProcess> = relays.iter().collect();
        crate::fleet::wait_spread(&all, &[1.0, 1.0]).await;
        for (id, aside) in &kept {
            for (sid, fields) in aside {
                xadd(&bus, cluster, &former(*id), sid, fields).await;
            }
        }
        let holder = crate::fleet::holder_of(&relays).await;
        relays.remove(holder).terminate().await;
        want.extend((aside_from..aside_from + later).map(name));
        all_once_in_order(&rx, &want).await;
        assert_moved(&bus, cluster, &[whole, split]).await;
    }

    // The shared payload records (a single Redis) were counted right through the moves: the
    // last delivery released the last of them.
    until_within(
        "no record and no entry left",
        Duration::from_secs(10),
        async || {
            let left: Vec<String> = store_query(
                &bus,
                cluster,
                redis::cmd("KEYS")
                    .arg("bigbluebutton:webhooks:out:payload:*")
                    .clone(),
            )
            .await;
            let queued = entries(&bus, cluster, &queue(whole)).await.len()
                + entries(&bus, cluster, &queue(split)).await.len();
            match left.is_empty() && queued == 0 {
                true => Ok(()),
                false => Err(format!("records left: {left:?}, entries left: {queued}")),
            }
        },
    )
    .await;
    for r in relays {
        r.terminate().await;
    }
}

/// Waits until both hooks got as many callbacks as `want` names, then checks that they are
/// those, in that order, and that nothing more comes.
async fn all_once_in_order(rx: &TestReceiver, want: &[String]) {
    let n = want.len();
    until_within(
        &format!("{n} callbacks to each hook"),
        Duration::from_secs(30),
        async || {
            for path in ["/whole", "/split"] {
                let got = rx.names_at(path);
                if got.len() < n {
                    return Err(format!("{path}: {got:?}"));
                }
            }
            Ok(())
        },
    )
    .await;
    // Proves that nothing happens: nothing more comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for path in ["/whole", "/split"] {
        assert_eq!(rx.names_at(path), want, "{path}: once each, in order");
    }
}

#[tokio::test]
async fn queues_named_by_an_earlier_version_are_moved_and_delivered_once_in_order() {
    queues_of_an_earlier_version(None, 1).await;
}

#[tokio::test]
async fn a_fleet_moves_the_queues_of_an_earlier_version_and_spreads_them() {
    queues_of_an_earlier_version(None, 2).await;
}

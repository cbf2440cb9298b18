//! Recovery of shared payloads and paged queues: several hooks share each event's stored
//! payload; after a `kill -9` with hundreds of callbacks queued per hook (more than a page), the
//! restarted relay delivers every one in bus order, puts events that arrive while it pages the
//! queues in after them, and leaves no payload behind once every hook has its callbacks.

use std::{
    collections::{BTreeSet, HashSet},
    time::Duration,
};

use crate::support::{
    RelayProcess, Reply, TestReceiver, TestRedis, TestRelay,
    redis::shared_payloads,
    relay::{create_hook, http_client},
    user_name,
    wait::{until, until_within},
};

/// Keys of the stored shared payloads.
async fn payload_keys(redis: &TestRedis) -> Vec<String> {
    let mut c = redis.conn().await.expect("redis");
    redis::cmd("KEYS")
        .arg(format!("{}*", hookrelay::base::redis_keys::PAYLOAD_PREFIX))
        .query_async(&mut c)
        .await
        .expect("keys")
}

/// Entries queued over all of `hooks`.
async fn queued(redis: &TestRedis, hooks: &[u64]) -> usize {
    let mut total = 0;
    for h in hooks {
        total += redis.queued(*h).await;
    }
    total
}

/// The user names delivered to `path`, in arrival order.
fn names(rx: &TestReceiver, path: &str) -> Vec<String> {
    rx.delivered()
        .iter()
        .filter(|r| r.uri.starts_with(path))
        .map(|r| user_name(&r.event()))
        .collect()
}

#[tokio::test]
async fn kill_9_with_shared_payloads_and_long_queues_loses_nothing_and_frees_every_payload() {
    const BEFORE: usize = 800;
    const DURING: usize = 200;
    const MAX_UNACKED: usize = 4;
    let config = format!("max_queue = 5000\nmax_unacked = {MAX_UNACKED}\n");
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    // Slow at first, so that most callbacks are still queued at the kill.
    rx.set_default(Reply::Delay(Duration::from_millis(20), 200));
    let relay = RelayProcess::start(&redis, &config).await;
    let http = http_client();
    let paths = ["/a", "/b", "/c"];
    let mut hooks = Vec::new();
    for p in paths {
        hooks.push(create_hook(&http, relay.api, &rx.url(p), "").await);
    }
    redis.publish_users(0..BEFORE).await;
    until_within("the burst queued", Duration::from_secs(60), async || {
        let (in_queues, delivered) = (queued(&redis, &hooks).await, rx.delivered_count());
        match in_queues + delivered >= 3 * BEFORE {
            true => Ok(()),
            false => Err(format!("{in_queues} queued, {delivered} delivered")),
        }
    })
    .await;
    let stored = payload_keys(&redis).await.len();
    assert!(
        stored > 0 && stored <= BEFORE,
        "one shared payload per queued event, not one per callback: {stored}"
    );
    relay.kill9().await;
    let at_kill = queued(&redis, &hooks).await;
    assert!(
        at_kill > 3 * 300,
        "more than a page per hook queued at the kill: {at_kill}"
    );
    rx.set_default(Reply::Status(200));
    let relay = RelayProcess::start(&redis, &config).await;
    // These arrive while the queues are paged in: they must come after everything queued.
    redis.publish_users(BEFORE..BEFORE + DURING).await;
    let total = BEFORE + DURING;
    let what = "everything delivered after the restart";
    until_within(what, Duration::from_secs(60), async || {
        let unique: Vec<usize> = paths
            .iter()
            .map(|p| names(&rx, p).iter().collect::<HashSet<_>>().len())
            .collect();
        match unique.iter().all(|n| *n >= total) {
            true => Ok(()),
            false => Err(unique),
        }
    })
    .await;
    for p in paths {
        let got = names(&rx, p);
        let mut seen = HashSet::new();
        let firsts: Vec<&String> = got.iter().filter(|n| seen.insert(n.as_str())).collect();
        let want: Vec<String> = (0..total).map(|i| format!("n{i}")).collect();
        assert!(
            firsts.iter().zip(&want).all(|(a, b)| *a == b) && firsts.len() == total,
            "{p}: every event once in bus order"
        );
        // At most the callbacks unmarked at the kill come again (the one in flight included).
        let repeated = got.len() - firsts.len();
        assert!(repeated <= MAX_UNACKED, "{p}: {repeated} repeated");
    }
    // Marks are written in batches: shortly after the last callback nothing is left.
    until_within("nothing left behind", Duration::from_secs(10), async || {
        let entries = queued(&redis, &hooks).await;
        let payloads = payload_keys(&redis).await.len();
        match entries == 0 && payloads == 0 {
            true => Ok(()),
            false => Err(format!(
                "left behind: {entries} entries, payloads {payloads}"
            )),
        }
    })
    .await;
    relay.terminate().await;
}

#[tokio::test]
async fn a_removed_hook_takes_its_queue_and_the_payloads_only_it_still_needed() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.status_for_prefix("/stuck", 503);
    let mut config = TestRelay::config(&redis);
    config.delivery.retry_intervals_ms = vec![60_000];
    let relay = TestRelay::start_with(&redis, config).await;
    let stuck = relay.create_hook(&rx.url("/stuck"), "").await;
    let fine = relay.create_hook(&rx.url("/fine"), "").await;
    redis.publish_users(0..50).await;
    until("the fine hook got its callbacks", async || {
        let (got, left) = (names(&rx, "/fine").len(), queued(&redis, &[fine]).await);
        match got >= 50 && left == 0 {
            true => Ok(()),
            false => Err(format!("{got} delivered, {left} queued")),
        }
    })
    .await;
    assert_eq!(queued(&redis, &[stuck]).await, 50);
    // The records the stuck hook still needs, each slot of its entries held, and no other.
    let needed = shared_payloads(&redis, stuck).await;
    assert_eq!(needed.len(), 50);
    assert!(needed.iter().all(|(_, held)| *held), "{needed:?}");
    let kept: BTreeSet<String> = payload_keys(&redis).await.into_iter().collect();
    let wanted: BTreeSet<String> = needed.into_iter().map(|(key, _)| key).collect();
    assert_eq!(kept, wanted, "still needed by the stuck hook");
    let xml = relay.call("destroy", &format!("hookID={stuck}")).await;
    assert!(xml.contains("<removed>true</removed>"), "{xml}");
    assert_eq!(queued(&redis, &[stuck]).await, 0);
    assert!(payload_keys(&redis).await.is_empty());
    relay.stop().await;
}

#[tokio::test]
async fn a_queue_beyond_its_window_keeps_the_newest_within_max_queue() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    // The first callback hangs while 1,000 events arrive: far more than the 512 held in
    // memory and than max_queue (300); the rest waits in Redis only. 8 s: all 1,000 are in
    // before it ends on a loaded machine too.
    rx.script([Reply::Delay(Duration::from_millis(8000), 200)]);
    let mut config = TestRelay::config(&redis);
    config.delivery.max_queue = 300;
    config.delivery.request_timeout_ms = 10_000;
    let relay = TestRelay::start_with(&redis, config).await;
    relay.create_hook(&rx.url("/w"), "").await;
    redis.publish_users(0..1000).await;
    until_within("301 callbacks", Duration::from_secs(30), async || {
        let got = names(&rx, "/w").len();
        match got >= 301 {
            true => Ok(()),
            false => Err(got),
        }
    })
    .await;
    // Proves that nothing happens: no callback beyond the 301 arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want: Vec<String> = std::iter::once(0)
        .chain(700..1000)
        .map(|i| format!("n{i}"))
        .collect();
    assert_eq!(
        names(&rx, "/w"),
        want,
        "the one in flight, then the newest 300"
    );
    let metrics = relay.metrics().await;
    assert_eq!(
        crate::support::metric_value(&metrics, "hookrelay_queue_dropped_total"),
        699.0
    );
    relay.stop().await;
}

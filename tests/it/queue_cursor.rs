//! The queues' layout in the store: a delivered callback moves its hook's cursor (the
//! timestamp of its last delivered entry) and its entry goes with its stream's whole node
//! (`XTRIM MINID ~`), never deleted alone; what waits is what comes after the cursor, for the
//! relay after a restart, for `destroy`, and for the removal of idle streams.

use std::{collections::BTreeSet, time::Duration};

use crate::support::{
    RelayProcess, Reply, TestReceiver, TestRedis, TestRelay,
    redis::shared_payloads,
    relay::{create_hook, http_client},
    user_name,
    wait::until,
};

fn queue(hook: u64) -> String {
    format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:queue")
}

fn cursor(hook: u64) -> String {
    format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:cursor")
}

async fn query<T: redis::FromRedisValue>(redis: &TestRedis, cmd: &mut redis::Cmd) -> T {
    let mut c = redis.conn().await.expect("redis");
    cmd.query_async(&mut c).await.expect("a store command")
}

/// Keys of the stored shared payloads.
async fn payload_keys(redis: &TestRedis) -> Vec<String> {
    let pattern = format!("{}*", hookrelay::base::redis_keys::PAYLOAD_PREFIX);
    query(redis, redis::cmd("KEYS").arg(pattern)).await
}

/// Calls of `command` in Redis' `INFO commandstats` (those made from scripts included).
async fn calls(redis: &TestRedis, command: &str) -> u64 {
    let info: String = query(redis, redis::cmd("INFO").arg("commandstats")).await;
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// 250 events to two hooks (shared payload records), through the real binary: no entry is
/// deleted alone (`XDEL` is never called), the streams end empty, each cursor is the timestamp
/// of its hook's last callback, every record is released, and after a restart the relay sends
/// only what is new: nothing delivered before the cursor comes again.
#[tokio::test]
async fn delivered_callbacks_move_the_cursor_and_leave_with_whole_nodes_never_one_by_one() {
    const N: usize = 250;
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let http = http_client();
    let a = create_hook(&http, relay.api, &rx.url("/a"), "").await;
    let b = create_hook(&http, relay.api, &rx.url("/b"), "").await;
    redis.publish_users(0..N).await;
    rx.wait_delivered(2 * N).await;
    until(
        "both streams trimmed whole, every record released",
        async || {
            let lens: (usize, usize) = (redis.xlen(&queue(a)).await, redis.xlen(&queue(b)).await);
            let records = payload_keys(&redis).await.len();
            match lens == (0, 0) && records == 0 {
                true => Ok(()),
                false => Err(format!("stream lengths {lens:?}, {records} records")),
            }
        },
    )
    .await;
    assert_eq!(calls(&redis, "xdel").await, 0, "no entry deleted alone");
    assert!(
        calls(&redis, "xtrim").await > 0,
        "nodes trimmed behind the cursors"
    );
    for (hook, path) in [(a, "/a"), (b, "/b")] {
        let last = rx
            .delivered()
            .iter()
            .rev()
            .find(|r| r.uri.starts_with(path))
            .map(|r| r.timestamp())
            .expect("a callback");
        let at: Option<u64> = query(&redis, redis::cmd("HGET").arg(cursor(hook)).arg("d")).await;
        assert_eq!(at, Some(last), "hook {hook}'s cursor");
        assert_eq!(redis.queued(hook).await, 0);
    }
    relay.terminate().await;
    let relay = RelayProcess::start(&redis, "").await;
    redis.publish_users(N..N + 1).await;
    rx.wait_delivered(2 * N + 2).await;
    // Proves that nothing happens: no callback delivered before the restart comes again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let want: Vec<String> = (0..=N).map(|i| format!("n{i}")).collect();
    assert_eq!(rx.names_at("/a"), want, "every event once, in bus order");
    assert_eq!(rx.names_at("/b"), want, "every event once, in bus order");
    relay.terminate().await;
}

/// A hook destroyed with some of its callbacks delivered and the rest waiting: its stream and
/// its cursor go, and with them the records only its waiting callbacks still needed, each
/// released once (the delivered ones released theirs when the cursor passed them).
#[tokio::test]
async fn destroy_releases_only_what_waits_after_the_cursor_and_takes_the_cursor_too() {
    let redis = TestRedis::start().await;
    let (rx, part) = (TestReceiver::start().await, TestReceiver::start().await);
    // 30 answered, then 503 for good (the retry a minute away).
    part.script(std::iter::repeat_n(Reply::Status(200), 30));
    part.set_default(Reply::Status(503));
    let mut config = TestRelay::config(&redis);
    config.delivery.retry_intervals_ms = vec![60_000];
    let relay = TestRelay::start_with(&redis, config).await;
    let fine = relay.create_hook(&rx.url("/fine"), "").await;
    let stuck = relay.create_hook(&part.url("/part"), "").await;
    redis.publish_users(0..50).await;
    rx.wait_delivered(50).await;
    let sent = part.wait_delivered(30).await;
    until(
        "20 waiting after the cursor, exactly their records kept",
        async || {
            let waiting = shared_payloads(&redis, stuck).await;
            let kept: BTreeSet<String> = payload_keys(&redis).await.into_iter().collect();
            let held = waiting.iter().all(|(_, held)| *held);
            let refs: BTreeSet<String> = waiting.iter().map(|(key, _)| key.clone()).collect();
            match waiting.len() == 20 && held && kept == refs {
                true => Ok(()),
                false => Err(format!(
                    "{} waiting, records {kept:?} for {refs:?}",
                    waiting.len()
                )),
            }
        },
    )
    .await;
    let at: Option<u64> = query(&redis, redis::cmd("HGET").arg(cursor(stuck)).arg("d")).await;
    assert_eq!(at, Some(sent[29].timestamp()), "the 30th delivered");
    let names: Vec<String> = sent
        .iter()
        .take(30)
        .map(|r| user_name(&r.event()))
        .collect();
    let want: Vec<String> = (0..30).map(|i| format!("n{i}")).collect();
    assert_eq!(names, want);
    let xml = relay.call("destroy", &format!("hookID={stuck}")).await;
    assert!(xml.contains("<removed>true</removed>"), "{xml}");
    let exists: u64 = query(
        &redis,
        redis::cmd("EXISTS").arg(queue(stuck)).arg(cursor(stuck)),
    )
    .await;
    assert_eq!(exists, 0, "the stream and the cursor gone");
    assert!(
        payload_keys(&redis).await.is_empty(),
        "each record released once"
    );
    assert_eq!(redis.queued(fine).await, 0);
    relay.stop().await;
}

/// The removal of idle streams reads what waits after the cursor: a stream whose entries are
/// all delivered (behind its cursor) goes with its cursor; one with an entry after the cursor
/// stays, cursor and all.
#[tokio::test]
async fn an_idle_stream_behind_its_cursor_goes_with_it_and_one_with_an_entry_after_stays() {
    use hookrelay::{base::ids::HookId, tidy};
    let redis = TestRedis::start().await;
    let mut conn = crate::support::redis::store_conn(&redis).await;
    let old = hookrelay::base::time::now_ms() - 20 * 60 * 1000;
    // Hook 1: two entries, both delivered. Hook 2: two entries, the first delivered.
    for (hook, delivered) in [(1u64, old + 1), (2, old)] {
        for ts in [old, old + 1] {
            let mut add = redis::cmd("XADD");
            add.arg(queue(hook))
                .arg(format!("{ts}-0"))
                .arg("p")
                .arg("x");
            let _: String = query(&redis, &mut add).await;
        }
        let mut set = redis::cmd("HSET");
        set.arg(cursor(hook)).arg("d").arg(delivered);
        let _: u64 = query(&redis, &mut set).await;
    }
    let dropped = tidy::drop_idle(&mut conn, &[HookId(1), HookId(2)], tidy::IDLE)
        .await
        .expect("tidy");
    assert_eq!(dropped, 1);
    for (hook, want) in [(1u64, 0u64), (2, 2)] {
        let exists: u64 = query(
            &redis,
            redis::cmd("EXISTS").arg(queue(hook)).arg(cursor(hook)),
        )
        .await;
        assert_eq!(exists, want, "hook {hook}'s stream and cursor");
    }
    assert_eq!(redis.queued(2).await, 1, "the entry after the cursor waits");
}

/// The journal's marks of delivery, called as the relay calls them: a round moves the cursor
/// to its last entry and releases each record once; the same round again (after a lost reply)
/// and a late round of older entries (another instance's) change nothing; drops and marks of
/// the same entries release each record once, in either order; what waits, and the oldest
/// waiting, are read after the cursor; a drain takes the rest, stream and cursor.
#[tokio::test]
async fn marks_of_delivery_move_the_cursor_forward_only_and_release_each_record_once() {
    use hookrelay::{
        base::ids::{HookId, RecordRef, StreamId},
        journal::{self, Removal},
    };
    let redis = TestRedis::start().await;
    let mut conn = crate::support::redis::store_conn(&redis).await;
    let prefix = hookrelay::base::redis_keys::PAYLOAD_PREFIX;
    // Hook 7: entries 1000..=1009, each referring to its own record (n = 1).
    let hook = HookId(7);
    for i in 0..10u64 {
        let mut hset = redis::cmd("HSET");
        hset.arg(format!("{prefix}{i}"))
            .arg("t")
            .arg("{}")
            .arg("n")
            .arg(1);
        let _: u64 = query(&redis, &mut hset).await;
        let mut add = redis::cmd("XADD");
        add.arg(queue(7)).arg(format!("{}-0", 1000 + i));
        add.arg("e").arg("user-joined").arg("s").arg(i);
        let _: String = query(&redis, &mut add).await;
    }
    let removal = |i: u64| Removal {
        id: StreamId(1000 + i),
        shared: Some(RecordRef(i)),
    };
    let mark = async |conn: &mut hookrelay::StoreConn, entries: &[Removal]| {
        let mut pipe = redis::pipe();
        journal::add_delivered(&mut pipe, &[(hook, entries)], false);
        journal::send_removals(conn, &pipe).await.expect("marked");
    };
    let first: Vec<Removal> = (0..4).map(removal).collect();
    mark(&mut conn, &first).await;
    mark(&mut conn, &first).await;
    mark(&mut conn, &[removal(1), removal(2)]).await;
    let at: Option<u64> = query(&redis, redis::cmd("HGET").arg(cursor(7)).arg("d")).await;
    assert_eq!(at, Some(1003));
    let records = payload_keys(&redis).await.len();
    assert_eq!(records, 6, "the four delivered released once each");
    let heads = journal::heads(&mut conn, &[hook, HookId(8)])
        .await
        .expect("heads");
    assert_eq!(heads[0].position.length, 6);
    assert_eq!(heads[0].position.delivered, 1003);
    assert_eq!(heads[0].position.last_ts, 1009);
    assert_eq!(heads[0].oldest, Some(1004));
    assert_eq!(heads[1].position.length, 0, "no stream: nothing waits");
    assert_eq!(heads[1].oldest, None);
    // A drop of an entry behind the cursor (another instance delivered it and released its
    // record) releases nothing; a drop after it does, and a late mark of the same entry (that
    // other instance's) then releases it no more.
    journal::remove(&mut conn, hook, &[removal(2)])
        .await
        .expect("removed");
    assert_eq!(payload_keys(&redis).await.len(), 6);
    journal::remove(&mut conn, hook, &[removal(5)])
        .await
        .expect("removed");
    assert_eq!(payload_keys(&redis).await.len(), 5);
    mark(&mut conn, &[removal(4), removal(5)]).await;
    assert_eq!(
        payload_keys(&redis).await.len(),
        4,
        "1004 released, 1005 not again"
    );
    let heads = journal::heads(&mut conn, &[hook]).await.expect("heads");
    assert_eq!(heads[0].position.length, 4);
    assert_eq!(heads[0].oldest, Some(1006));
    journal::delete(&mut conn, hook).await.expect("drained");
    let exists: u64 = query(&redis, redis::cmd("EXISTS").arg(queue(7)).arg(cursor(7))).await;
    assert_eq!(exists, 0);
    assert!(
        payload_keys(&redis).await.is_empty(),
        "the four waiting released once each"
    );
}

/// A record holding several events' payloads, as a batch writes it: its entries name their
/// slot (`k`) and read back to each slot's payload; a round of a hook's
/// entries of one record releases it with one `HINCRBY`; the record goes with the last entry
/// of any of its slots, whichever way each leaves (delivered, dropped, drained).
#[tokio::test]
async fn a_record_of_several_payloads_serves_each_slot_and_goes_with_the_last_of_its_entries() {
    use hookrelay::{
        Payload,
        base::{
            ids::{HookId, RecordRef, StreamId},
            sources::SourceTable,
        },
        journal::{self, Entry, Record, Removal, StoredBody},
    };
    use std::sync::Arc;
    let redis = TestRedis::start().await;
    let mut conn = crate::support::redis::store_conn(&redis).await;
    let prefix = hookrelay::base::redis_keys::PAYLOAD_PREFIX;
    let payloads: Vec<Arc<Payload>> = (0..3)
        .map(|i| Arc::new(Payload::new(format!("{{\"n\":{i}}}"))))
        .collect();
    let records = [Record {
        shared: RecordRef(900),
        payloads: &payloads,
        refs: 6,
    }];
    let entry = |ts: u64, slot: u16| Entry {
        ts,
        payload: payloads[usize::from(slot)].clone(),
        event_id: "user-joined".into(),
        arrived: None,
        shared: Some(RecordRef(900)),
        slot,
        source: 0,
        chain: None,
        original: None,
        trace: None,
    };
    // Hooks 1 and 2 get the three events.
    let batch: Vec<(HookId, Entry)> = (0..3u16)
        .flat_map(|k| {
            let ts = 100 + u64::from(k);
            [(HookId(1), entry(ts, k)), (HookId(2), entry(ts, k))]
        })
        .collect();
    let (none, sources) = (redis::pipe(), SourceTable::single("localhost"));
    let not_added = journal::append(&mut conn, &none, None, &records, &batch, &sources)
        .await
        .expect("appended");
    assert!(not_added.is_empty(), "{not_added:?}");
    let stored: redis::streams::StreamRangeReply =
        query(&redis, redis::cmd("XRANGE").arg(queue(1)).arg("-").arg("+")).await;
    let slots: Vec<Option<String>> = stored.ids.iter().map(|e| e.get("k")).collect();
    assert_eq!(
        slots,
        [Some("0".into()), Some("1".into()), Some("2".into())]
    );
    let page = journal::read_page(&mut conn, HookId(1), None, u64::MAX, 10)
        .await
        .expect("read");
    let at: Vec<Option<(u64, u16)>> = page
        .iter()
        .map(|s| match s.body {
            StoredBody::Shared(r, k) => Some((r.0, k)),
            _ => None,
        })
        .collect();
    assert_eq!(at, [Some((900, 0)), Some((900, 1)), Some((900, 2))]);
    let texts = journal::read_records(
        &mut conn,
        &[
            (RecordRef(900), 2),
            (RecordRef(900), 0),
            (RecordRef(900), 3),
        ],
    )
    .await
    .expect("read");
    assert_eq!(
        texts,
        [Some("{\"n\":2}".into()), Some("{\"n\":0}".into()), None]
    );
    let count = async || -> Option<i64> {
        query(
            &redis,
            redis::cmd("HGET").arg(format!("{prefix}900")).arg("n"),
        )
        .await
    };
    assert_eq!(count().await, Some(6));
    let gone = |ts| Removal {
        id: StreamId(ts),
        shared: Some(RecordRef(900)),
    };
    let mark = async |conn: &mut hookrelay::StoreConn, hook: u64, entries: &[Removal]| {
        let mut pipe = redis::pipe();
        journal::add_delivered(&mut pipe, &[(HookId(hook), entries)], false);
        journal::send_removals(conn, &pipe).await.expect("marked");
    };
    // Hook 1 delivers all three in one round, and the round is sent again.
    let round = [gone(100), gone(101), gone(102)];
    mark(&mut conn, 1, &round).await;
    mark(&mut conn, 1, &round).await;
    assert_eq!(count().await, Some(3));
    assert_eq!(
        calls(&redis, "hincrby").await,
        1,
        "one release for three entries"
    );
    // Hook 2: its first dropped, its second delivered, its third drained.
    journal::remove(&mut conn, HookId(2), &[gone(100)])
        .await
        .expect("removed");
    assert_eq!(count().await, Some(2));
    mark(&mut conn, 2, &[gone(101)]).await;
    assert_eq!(count().await, Some(1));
    journal::delete(&mut conn, HookId(2))
        .await
        .expect("drained");
    assert_eq!(count().await, None, "gone with the last entry of any slot");
    assert!(payload_keys(&redis).await.is_empty());
    // An entry an earlier version wrote names no slot: it is read as slot 0.
    let mut add = redis::cmd("XADD");
    add.arg(queue(3)).arg("5-0").arg("e").arg("user-joined");
    let _: String = query(&redis, add.arg("s").arg(901)).await;
    let page = journal::read_page(&mut conn, HookId(3), None, u64::MAX, 10)
        .await
        .expect("read");
    assert!(matches!(
        page[0].body,
        StoredBody::Shared(RecordRef(901), 0)
    ));
}

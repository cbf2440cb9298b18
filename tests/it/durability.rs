//! Nothing accepted is lost: `kill -9` in the middle of a stream, a graceful stop with callbacks
//! in flight, Redis stopped for 10 s under a running relay.

use std::time::{Duration, Instant};

use crate::support::{
    RelayProcess, Reply, TestReceiver, TestRedis, TestRelay, check_no_loss,
    relay::{create_hook, http_client},
    user_name,
    wait::{until, until_progressing, until_within},
};

async fn queue_len(redis: &TestRedis, hook: u64) -> usize {
    redis.queued(hook).await
}

/// How many entries a hook's stream has ever had added (Redis 7 `XINFO STREAM`).
async fn queue_added(redis: &TestRedis, hook: u64) -> usize {
    let mut c = redis.conn().await.unwrap();
    let info: redis::RedisResult<std::collections::HashMap<String, redis::Value>> =
        redis::cmd("XINFO")
            .arg("STREAM")
            .arg(format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:queue"))
            .query_async(&mut c)
            .await;
    match info.ok().and_then(|i| i.get("entries-added").cloned()) {
        Some(redis::Value::Int(n)) => n as usize,
        _ => 0,
    }
}

#[tokio::test]
async fn kill_9_in_the_middle_of_10000_events_loses_nothing() {
    // max_unacked = 1: each delivery is marked in Redis before the next is sent.
    kill_9_mid_stream(10_000, 1).await;
}

#[tokio::test]
async fn kill_9_repeats_at_most_max_unacked_callbacks() {
    kill_9_mid_stream(5_000, 8).await;
}

/// Publishes `n` events to one hook, kills the relay with SIGKILL once a fifth is delivered,
/// restarts it: nothing lost, bus order kept, at most `max_unacked` callbacks repeated.
async fn kill_9_mid_stream(n: usize, max_unacked: usize) {
    let config = format!("max_queue = 20000\nmax_unacked = {max_unacked}\n");
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, &config).await;
    let hook = create_hook(&http_client(), relay.api, &rx.url("/k"), "").await;
    redis.publish_users(0..n).await;
    // Kill once a part is delivered and everything is accepted (written to the hook's queue).
    let what = format!("{} delivered and {n} accepted", n / 5);
    until_within(&what, Duration::from_secs(60), async || {
        let delivered = rx.delivered_count();
        let added = queue_added(&redis, hook).await;
        match delivered >= n / 5 && added >= n {
            true => Ok(()),
            false => Err(format!("{delivered} delivered, {added} accepted")),
        }
    })
    .await;
    relay.kill9().await;
    let at_kill = rx.delivered_count();
    let relay = RelayProcess::start(&redis, &config).await;
    // However slow the machine: a stall of 30 s (nothing more delivered) is the failure.
    let what = format!("all {n} after restart");
    until_progressing(&what, Duration::from_secs(30), async || {
        let names: Vec<String> = rx
            .delivered()
            .iter()
            .map(|r| user_name(&r.event()))
            .collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        match unique.len() >= n {
            true => Ok(()),
            false => Err((
                unique.len(),
                format!("only {} of {n} after restart", unique.len()),
            )),
        }
    })
    .await;
    let names: Vec<String> = rx
        .delivered()
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    let duplicates = check_no_loss(&names, n);
    eprintln!(
        "kill -9: sent {n}, delivered before kill {at_kill}, delivered {} ({} unique), lost 0, duplicated {duplicates}",
        names.len(),
        names.len() - duplicates
    );
    assert!(
        duplicates <= max_unacked,
        "at most max_unacked ({max_unacked}) callbacks are repeated, got {duplicates}"
    );
    // Timestamps of re-sent callbacks are the original ones, and first sendings increase.
    let mut first_ts: std::collections::HashMap<String, u64> = Default::default();
    let mut firsts = Vec::new();
    for r in rx.delivered() {
        let (name, ts) = (user_name(&r.event()), r.timestamp());
        match first_ts.get(&name) {
            Some(t) => assert_eq!(*t, ts, "{name} sent again with another timestamp"),
            None => {
                first_ts.insert(name, ts);
                firsts.push(ts);
            }
        }
    }
    assert!(firsts.windows(2).all(|w| w[0] < w[1]));
    // Marks of delivery are written in batches: the queue empties shortly after the last one.
    until_within(
        "the queue empty at the end",
        Duration::from_secs(10),
        async || {
            let len = queue_len(&redis, hook).await;
            match len == 0 {
                true => Ok(()),
                false => Err(len),
            }
        },
    )
    .await;
    relay.terminate().await;
}

#[tokio::test]
async fn graceful_stop_with_callbacks_in_flight_resumes_after_restart() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Delay(Duration::from_millis(100), 200));
    let relay = TestRelay::start(&redis).await;
    relay.create_hook(&rx.url("/g"), "").await;
    redis.publish_users(0..30).await;
    rx.wait_delivered(3).await;
    relay.stop().await;
    let at_stop = rx.delivered().len();
    assert!(at_stop < 30, "stopped in the middle ({at_stop})");
    let relay = TestRelay::start(&redis).await;
    // A marker after the 30: a repeated callback would come before it (one queue, in order).
    redis.publish_users(30..31).await;
    rx.wait_delivered(31).await;
    let names: Vec<String> = rx
        .delivered()
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    assert_eq!(names.last().map(String::as_str), Some("n30"));
    let duplicates = check_no_loss(&names, 31);
    assert_eq!(
        duplicates, 0,
        "a graceful stop finishes the callback in flight"
    );
    relay.stop().await;
}

#[tokio::test]
async fn redis_stopped_for_10s_then_everything_resumes() {
    let mut redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Delay(Duration::from_millis(300), 200));
    let relay = TestRelay::start(&redis).await;
    relay.create_hook(&rx.url("/r"), "").await;
    redis.publish_users(0..10).await;
    rx.wait_delivered(1).await;
    redis.stop().await;
    let down = Instant::now();
    // The API answers a clear FAILED while the store is down, and quickly.
    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2F127.0.0.1%3A9%2Fx")
        .await;
    assert!(
        xml.contains("<messageKey>createHookError</messageKey>"),
        "{xml}"
    );
    assert!(
        relay.call("list", "").await.contains("SUCCESS"),
        "listing is served from memory"
    );
    // Part of the scenario: Redis stays down for 10 s.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(down.elapsed())).await;
    rx.set_default(Reply::Status(200));
    redis.start_again().await;
    let up = Instant::now();
    redis.wait_for_subscriber().await;
    let resubscribed = up.elapsed();
    redis.publish_users(10..12).await;
    rx.wait_delivered(12).await;
    eprintln!(
        "redis back: resubscribed after {resubscribed:?}, all delivered after {:?}",
        up.elapsed()
    );
    let names: Vec<String> = rx
        .delivered()
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    let duplicates = check_no_loss(&names, 12);
    assert!(duplicates <= 1, "{duplicates}");
    assert!(
        relay
            .metrics()
            .await
            .contains(r#"hookrelay_bus_reconnects_total{source="default"} 1"#)
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_full_queue_drops_its_oldest_and_counts_them() {
    let redis = TestRedis::start().await;
    let (slow, other) = (TestReceiver::start().await, TestReceiver::start().await);
    // n0 stays in flight for 4 s, long enough for the 20 events after it on a loaded machine;
    // the others take 1 s each.
    slow.script([Reply::Delay(Duration::from_millis(4000), 200)]);
    slow.set_default(Reply::Delay(Duration::from_millis(1000), 200));
    let mut config = TestRelay::config(&redis);
    config.delivery.max_queue = 5;
    config.delivery.request_timeout_ms = 6000;
    let relay = TestRelay::start_with(&redis, config).await;
    let hook = relay.create_hook(&slow.url("/slow"), "").await;
    relay.create_hook(&other.url("/other"), "").await;
    redis.publish_users(0..1).await;
    // Once n0 is in flight, n1..n20 arrive: the queue keeps the newest five.
    until("n0 in flight to the slow hook", async || {
        match slow.received().is_empty() {
            false => Ok(()),
            true => Err("nothing received"),
        }
    })
    .await;
    // One at a time, each once the fast hook (same bound) has the one before: it keeps up
    // however slow the machine.
    for i in 1..21 {
        other.wait_delivered(i).await;
        redis.publish_users(i..i + 1).await;
        // Part of the scenario: the events spaced apart.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    other.wait_delivered(21).await;
    // Redis holds the five queued plus the one in flight (drops are removed in the background).
    let len = until_within("six in the queue", Duration::from_secs(1), async || {
        let len = queue_len(&redis, hook).await;
        match len <= 6 {
            true => Ok(len),
            false => Err(len),
        }
    })
    .await;
    assert_eq!(len, 6);
    slow.wait_delivered(6).await;
    // Proves that nothing happens: no other callback reaches the slow hook while the sixth is
    // in flight (its reply takes 1 s).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let names: Vec<String> = slow
        .delivered()
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    assert_eq!(names, ["n0", "n16", "n17", "n18", "n19", "n20"]);
    let m = relay.metrics().await;
    assert!(m.contains("hookrelay_queue_dropped_total 15"), "{m}");
    // The other hook lost nothing.
    let names: Vec<String> = other
        .delivered()
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    assert_eq!(check_no_loss(&names, 21), 0);
    relay.stop().await;
}

#[tokio::test]
async fn destroying_a_hook_removes_its_queue() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    // The first callback stays in flight for 3 s: on a loaded machine too, the others are all
    // still queued when the hook is destroyed.
    rx.script([Reply::Delay(Duration::from_millis(3000), 200)]);
    rx.set_default(Reply::Delay(Duration::from_millis(500), 200));
    let mut config = TestRelay::config(&redis);
    config.delivery.request_timeout_ms = 6000;
    let relay = TestRelay::start_with(&redis, config).await;
    let hook = relay.create_hook(&rx.url("/d"), "").await;
    redis.publish_users(0..10).await;
    let what = "the queue holding the callbacks, the first in flight";
    let queued = until_within(what, Duration::from_secs(5), async || {
        let queued = queue_len(&redis, hook).await;
        match queued >= 9 && !rx.received().is_empty() {
            true => Ok(queued),
            false => Err(queued),
        }
    })
    .await;
    assert!(queued >= 9, "the queue never held the callbacks ({queued})");
    assert!(
        relay
            .call("destroy", &format!("hookID={hook}"))
            .await
            .contains("<removed>true</removed>")
    );
    assert_eq!(queue_len(&redis, hook).await, 0);
    // Proves that nothing happens: no queued callback goes out after the destroy, until 700 ms
    // after the one in flight was answered (when the next would have gone).
    let first = rx
        .received()
        .first()
        .map(|r| r.at)
        .expect("the first callback");
    let answered = first + Duration::from_millis(3000 + 700);
    tokio::time::sleep_until(answered.into()).await;
    assert!(
        rx.received().len() <= 1,
        "only the callback in flight went out"
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_batch_sent_again_after_a_lost_reply_is_harmless_and_shared_payloads_go_with_their_last_entry()
 {
    use hookrelay::{
        Payload,
        base::{
            ids::{HookId, RecordRef, StreamId},
            redis_keys::PAYLOAD_PREFIX,
        },
        journal::{self, Entry, Record, Removal, StoredBody},
    };
    let gone = |ts, shared: Option<u64>| Removal {
        id: StreamId(ts),
        shared: shared.map(RecordRef),
    };
    use std::sync::Arc;
    let redis = TestRedis::start().await;
    let client = redis::Client::open(redis.url()).unwrap();
    let manager = redis::aio::ConnectionManager::new(client.clone())
        .await
        .unwrap();
    let mut conn = hookrelay::StoreConn::single(manager, client);
    let own = |ts| Entry {
        ts,
        payload: Arc::new(Payload::new(format!("p{ts}"))),
        event_id: "user-joined".into(),
        arrived: None,
        shared: None,
        slot: 0,
        source: 0,
        chain: None,
        original: None,
        trace: None,
    };
    // One payload for hooks 7 and 8, stored once as record 500.
    let shared_payload = Arc::new(Payload::new("shared text"));
    let shared = |ts| Entry {
        payload: shared_payload.clone(),
        shared: Some(RecordRef(500)),
        ..own(ts)
    };
    let records = [Record {
        shared: RecordRef(500),
        payloads: std::slice::from_ref(&shared_payload),
        refs: 2,
    }];
    let batch = vec![
        (HookId(7), own(10)),
        (HookId(7), shared(11)),
        (HookId(8), shared(11)),
    ];
    // The first attempt wrote part of the batch before its reply was lost; the whole batch is
    // sent again.
    let none = redis::pipe();
    let one_source = hookrelay::base::sources::SourceTable::single("localhost");
    let not_added = journal::append(&mut conn, &none, None, &records, &batch[..2], &one_source)
        .await
        .unwrap();
    assert!(not_added.is_empty(), "{not_added:?}");
    // Those already written are reported (the relay counts and logs them), the rest added.
    let not_added = journal::append(&mut conn, &none, None, &records, &batch, &one_source)
        .await
        .unwrap();
    assert_eq!(
        not_added,
        [(HookId(7), StreamId(10)), (HookId(7), StreamId(11))]
    );
    // The reference count of a record; `None` once it is gone.
    let count = |conn: hookrelay::StoreConn, record: u64| async move {
        let mut c = conn;
        let n: Option<i64> = redis::cmd("HGET")
            .arg(format!("{PAYLOAD_PREFIX}{record}"))
            .arg("n")
            .query_async(&mut c)
            .await
            .unwrap();
        n
    };
    let refs = |conn| count(conn, 500);
    assert_eq!(
        refs(conn.clone()).await,
        Some(2),
        "sent twice, counted once"
    );
    // A Redis that forgot the scripts (restarted, or SCRIPT FLUSH) gets them again.
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let not_added = journal::append(
        &mut conn,
        &none,
        None,
        &[],
        &[(HookId(8), own(12))],
        &one_source,
    )
    .await
    .unwrap();
    assert!(not_added.is_empty());
    // A clock that went back: refused, and its reference released at once.
    let late = [Record {
        shared: RecordRef(501),
        payloads: std::slice::from_ref(&shared_payload),
        refs: 2,
    }];
    let back = |ts| Entry {
        shared: Some(RecordRef(501)),
        ..shared(ts)
    };
    let not_added = journal::append(
        &mut conn,
        &none,
        None,
        &late,
        &[(HookId(7), back(5)), (HookId(9), back(20))],
        &one_source,
    )
    .await
    .unwrap();
    assert_eq!(not_added, [(HookId(7), StreamId(5))]);
    assert_eq!(count(conn.clone(), 501).await, Some(1));
    journal::delete(&mut conn, HookId(9)).await.unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg(format!("{PAYLOAD_PREFIX}501"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!exists, "the deleted queue released its record");

    journal::remove(&mut conn, HookId(8), &[gone(12, None)])
        .await
        .unwrap();
    let read = |hook| {
        let mut c = conn.clone();
        async move {
            journal::read_page(&mut c, hook, None, u64::MAX, 100)
                .await
                .unwrap()
                .into_iter()
                .map(|s| {
                    let body = match s.body {
                        StoredBody::Inline(t) => t,
                        StoredBody::Shared(r, k) => format!("record {r}.{k}"),
                        StoredBody::Unreadable => "?".into(),
                    };
                    (s.ts, body)
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        read(HookId(7)).await,
        [(10, "p10".into()), (11, "record 500.0".into())]
    );
    assert_eq!(read(HookId(8)).await, [(11, "record 500.0".into())]);
    assert_eq!(
        journal::read_records(&mut conn, &[(RecordRef(500), 0)])
            .await
            .unwrap(),
        [Some("shared text".to_string())]
    );
    // Removing twice releases once; the record goes with its last entry.
    journal::remove(&mut conn, HookId(7), &[gone(10, None), gone(11, Some(500))])
        .await
        .unwrap();
    journal::remove(&mut conn, HookId(7), &[gone(11, Some(500))])
        .await
        .unwrap();
    assert_eq!(refs(conn.clone()).await, Some(1));
    journal::remove(&mut conn, HookId(8), &[gone(11, Some(500))])
        .await
        .unwrap();
    assert_eq!(refs(conn.clone()).await, None, "gone with its last entry");
    // The flusher removes several hooks' entries in one call: a record they share is released
    // once per entry removed, however often the call is repeated.
    let records = [Record {
        shared: RecordRef(500),
        payloads: std::slice::from_ref(&shared_payload),
        refs: 3,
    }];
    let batch = vec![
        (HookId(7), shared(20)),
        (HookId(8), shared(20)),
        (HookId(9), shared(20)),
    ];
    journal::append(&mut conn, &none, None, &records, &batch, &one_source)
        .await
        .unwrap();
    let done: &[Removal] = &[gone(20, Some(500))];
    let mut pipe = redis::pipe();
    journal::add_delivered(
        &mut pipe,
        &[(HookId(7), done), (HookId(8), done), (HookId(8), &[])],
        false,
    );
    journal::send_removals(&mut conn, &pipe).await.unwrap();
    journal::send_removals(&mut conn, &pipe).await.unwrap();
    assert_eq!(refs(conn.clone()).await, Some(1));
    let mut pipe = redis::pipe();
    journal::add_delivered(
        &mut pipe,
        &[(HookId(9), done), (HookId(7), &[gone(10, None)])],
        false,
    );
    journal::send_removals(&mut conn, &pipe).await.unwrap();
    assert_eq!(refs(conn.clone()).await, None);
    // Emptied, the stream still knows its last id: a restart starts above it.
    let pos = journal::position(&mut conn, HookId(7)).await.unwrap();
    assert_eq!((pos.last_ts, pos.length), (20, 0));
    assert_eq!(
        journal::position(&mut conn, HookId(99))
            .await
            .unwrap()
            .last_ts,
        0
    );
}

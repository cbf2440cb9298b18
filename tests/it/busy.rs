//! Busy receivers (`docs/receivers.md`): a 429 or 503 with `Retry-After` delays the hook's next
//! attempt as asked (seconds or an HTTP date), bounded by `delivery.max_retry_after_s`; asked
//! within the bound it never counts toward the hook's removal, beyond it the answer is a
//! failure like any other. Asserted on the receiver's arrival times.

use std::time::{Duration, SystemTime};

use crate::support::{
    Reply, TestReceiver, TestRedis, TestRelay, user_joined, user_name, wait::until,
};

/// The gaps between consecutive requests to `path`.
fn gaps(rx: &TestReceiver, path: &str) -> Vec<Duration> {
    let at: Vec<_> = rx
        .received()
        .iter()
        .filter(|r| r.uri.split('?').next() == Some(path))
        .map(|r| r.at)
        .collect();
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test]
async fn a_busy_receiver_gets_the_time_it_asks_for_and_keeps_its_order() {
    let redis = TestRedis::start().await;
    // The schedule alone would give up after four failures within 300 ms.
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    let written = std::time::Instant::now();
    let in_five_s = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(5));
    rx.script([
        Reply::Busy(429, "1".into()),
        Reply::Busy(503, in_five_s),
        Reply::Busy(429, "0".into()),
        Reply::Busy(429, "0".into()),
        Reply::Busy(429, "0".into()),
        Reply::Busy(429, "0".into()),
    ]);
    relay.create_hook(&rx.url("/busy"), "").await;
    for i in 0..3 {
        redis
            .publish(&user_joined("m1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    let got = rx.wait_delivered(3).await;
    let names: Vec<String> = got.iter().map(|r| user_name(&r.event())).collect();
    assert_eq!(names, ["n0", "n1", "n2"], "in order, each once");
    assert_eq!(rx.received().len(), 9, "six busy answers, three deliveries");
    let gaps = gaps(&rx, "/busy");
    // The first wait is the one asked (1 s); the second runs to the date asked, 5 s after the
    // script was written (a whole second: 4 to 5 s), so the third attempt comes 4 s or more
    // after that; a loaded machine may only add to either.
    assert!(gaps[0] >= Duration::from_secs(1), "{gaps:?}");
    assert!(gaps[0] < Duration::from_secs(4), "{gaps:?}");
    let third = rx.received()[2].at;
    assert!(
        third >= written + Duration::from_secs(4),
        "{:?} after the date was written",
        third - written
    );
    assert!(gaps[1] < Duration::from_secs(8), "{gaps:?}");
    // Four more busy answers than the schedule allows failures: the hook is still there.
    let list = relay.call("list", "").await;
    assert!(list.contains(&rx.url("/busy")), "{list}");
    relay.stop().await;
}

#[tokio::test]
async fn asking_for_more_than_the_bound_gets_the_bound_and_counts_as_a_failure() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.max_retry_after_s = 1;
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Busy(503, "3600".into()));
    relay.create_hook(&rx.url("/greedy"), "").await;
    redis.publish(&user_joined("m1", "u0", "n0")).await;
    // Four attempts (the schedule's three retries), each a bound apart, then removed.
    until("the hook removed after its failures", async || {
        let list = relay.call("list", "").await;
        match list.contains(&rx.url("/greedy")) {
            false => Ok(()),
            true => Err(rx.received().len()),
        }
    })
    .await;
    let gaps = gaps(&rx, "/greedy");
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for g in &gaps {
        assert!(
            *g >= Duration::from_secs(1) && *g < Duration::from_secs(4),
            "{gaps:?}"
        );
    }
    relay.stop().await;
}

/// `[[delivery.receivers]]`: one rate for every hook of a receiver; its arrivals never exceed
/// the rate plus the burst, each hook's come in order, and none is lost.
#[tokio::test]
async fn a_receivers_rate_holds_for_all_its_hooks_and_nothing_is_lost() {
    const RATE: f64 = 20.0;
    const BURST: f64 = 5.0;
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.receivers = vec![hookrelay::config::ReceiverConfig {
        url_prefix: rx.url("/"),
        name: "lms".into(),
        rate_per_s: RATE as u32,
        burst: BURST as u32,
        max_connections: 0,
    }];
    let relay = TestRelay::start_with(&redis, config).await;
    for h in 0..2 {
        relay.create_hook(&rx.url(&format!("/h{h}")), "").await;
    }
    for i in 0..30 {
        redis
            .publish(&user_joined("m1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    let got = rx.wait_delivered(60).await;
    let want: Vec<String> = (0..30).map(|i| format!("n{i}")).collect();
    for h in 0..2 {
        assert_eq!(
            rx.names_at(&format!("/h{h}")),
            want,
            "hook {h}: in order, each once"
        );
    }
    let mut at: Vec<_> = got.iter().map(|r| r.at).collect();
    at.sort();
    // Any run of arrivals fits in the bucket: the burst, plus the rate over its span (and one
    // for the clocks' grain). Without the rate the 60 arrive within a few milliseconds.
    for i in 0..at.len() {
        for j in i..at.len() {
            let span = (at[j] - at[i]).as_secs_f64();
            let n = (j - i + 1) as f64;
            assert!(
                n <= BURST + RATE * span + 1.0,
                "{n} arrivals in {span:.3} s"
            );
        }
    }
    let waited = crate::support::metric_value(
        &relay.metrics().await,
        r#"hookrelay_receiver_rate_wait_seconds_total{receiver="lms"}"#,
    );
    assert!(
        waited > 1.0,
        "the callbacks waited for the rate: {waited} s in all"
    );
    relay.stop().await;
}

/// A circuit per receiver (`delivery.circuit_after`): a down host with 50 hooks gets one probe
/// at a time, once per interval (connections counted at its socket), not 50 hooks' retries;
/// when it answers again every hook resumes, none given up.
#[tokio::test]
async fn a_down_receiver_with_many_hooks_gets_one_probe_at_a_time_and_all_resume() {
    use crate::support::bad_receiver::{BadReceiver, Misbehaviour};
    use std::sync::atomic::Ordering;
    const HOOKS: usize = 50;
    let redis = TestRedis::start().await;
    let bad = BadReceiver::start(Misbehaviour::Reset).await;
    let mut config = TestRelay::config(&redis);
    config.delivery.circuit_after = 5;
    config.delivery.circuit_max_open_s = 1;
    // Ten tries a second per hook, never given up during the test.
    config.delivery.retry_intervals_ms = vec![100; 1000];
    let relay = TestRelay::start_with(&redis, config).await;
    for h in 0..HOOKS {
        relay.create_hook(&format!("{}/{h}", bad.url()), "").await;
    }
    redis.publish(&user_joined("m1", "u0", "n0")).await;
    let series = format!(
        r#"hookrelay_receiver_circuit_open{{receiver="127.0.0.1:{}"}}"#,
        bad.addr.port()
    );
    until("the circuit opens", async || {
        let open = crate::support::metric_value(&relay.metrics().await, &series);
        if open == 1.0 { Ok(()) } else { Err(open) }
    })
    .await;
    // `hooks show` (the admin API) says so for each of its hooks.
    let shown = relay.admin_get("/v1/hooks/1").await;
    assert_eq!(shown["receiver_circuit"], "open", "{shown}");
    let before = bad.connections.load(Ordering::SeqCst);
    // Proves how few attempts happen while it is open: 3.5 s of probes, one a second (the 50
    // hooks' own schedules would make about 1,750).
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let probes = bad.connections.load(Ordering::SeqCst) - before;
    assert!((2..=5).contains(&probes), "{probes} connections in 3.5 s");

    bad.healed.store(true, Ordering::SeqCst);
    until(
        "every hook delivers once the receiver answers",
        async || {
            let answered = bad.answered.load(Ordering::SeqCst);
            if answered >= HOOKS as u64 {
                Ok(())
            } else {
                Err(answered)
            }
        },
    )
    .await;
    let m = relay.metrics().await;
    assert_eq!(crate::support::metric_value(&m, &series), 0.0, "closed");
    assert_eq!(
        relay.admin_get("/v1/hooks/1").await["receiver_circuit"],
        "closed"
    );
    assert_eq!(
        crate::support::metric_value(
            &m,
            r#"hookrelay_hooks_removed_total{tenant="",reason="failures"}"#
        ),
        0.0
    );
    assert_eq!(
        bad.answered.load(Ordering::SeqCst),
        HOOKS as u64,
        "each hook's n0 once"
    );
    relay.stop().await;
}

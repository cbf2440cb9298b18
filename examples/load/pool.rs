//! The pool scenario (docs/pool.md): N edges on loopback, each on a BBB "server" of its own,
//! into one pool store, taken by two pool relays as a fleet (delivery spread, unless `--no-spread`) with one hook per
//! meeting (`--meetings` a server), all to one receiver. Every server publishes user joins at
//! a fixed rate, spread over its meetings, so each event makes one callback. Measures the
//! latency from publish to the receiver, loss and repeats (goal 0), the relays' CPU per event
//! and the edges' CPU per message; with `--outage-s`, the store is stopped that long mid-run
//! (the fleet lease outlasts it): the time to catch up once it is back, and the latency of what
//! was published after.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use crate::{
    edges::{Edge, outage, percentile, publisher, start_edge},
    launch::{Relay, Setup},
    procstat,
    scenario::Figures,
    sink::Sink,
    support::{TestRedis, meeting_created, user_joined},
};

/// Numbers of one edge's events start at `edge * SPAN`.
const SPAN: usize = 10_000_000;

/// Publishes `rate` user joins a second for `seconds` on `bbb`, in ticks of 10 ms, spread over
/// `meetings` meetings; returns each event's number and when it was published.
async fn drive(
    bbb_url: String,
    edge: usize,
    meetings: usize,
    rate: u64,
    seconds: u64,
) -> Vec<(usize, Instant)> {
    let (mut conn, per_tick, mut tick) = publisher(bbb_url, rate).await;
    let mut sent = Vec::with_capacity(per_tick * seconds as usize * 100);
    let mut n = 0;
    for _ in 0..seconds * 100 {
        tick.tick().await;
        let mut pipe = redis::pipe();
        for _ in 0..per_tick {
            let i = edge * SPAN + n;
            let m = format!("m{}", n % meetings);
            let joined = user_joined(&m, &format!("u{n}"), &format!("user {i}"));
            pipe.publish("from-akka-apps-redis-channel", joined)
                .ignore();
            n += 1;
        }
        let at = Instant::now();
        let () = pipe.query_async(&mut conn).await.expect("publish");
        sent.extend((n - per_tick..n).map(|k| (edge * SPAN + k, at)));
    }
    sent
}

/// Each event's latency (ms) from publish to the receiver, of those published at or after
/// `after` only; how many arrived more than once; the last arrival of those published before
/// `after`.
fn latencies(
    sent: &std::collections::HashMap<usize, Instant>,
    sink: &Sink,
    after: Option<Instant>,
) -> (Vec<f64>, usize, Option<Instant>) {
    let (mut out, mut seen, mut repeats, mut last_before) =
        (Vec::new(), HashSet::new(), 0, None::<Instant>);
    for (at, n) in sink.arrivals() {
        let Some(n) = n else { continue };
        if !seen.insert(n) {
            repeats += 1;
            continue;
        }
        let Some(published) = sent.get(&n) else {
            continue;
        };
        if after.is_none_or(|a| *published >= a) {
            out.push(at.saturating_duration_since(*published).as_secs_f64() * 1e3);
        } else {
            last_before = Some(last_before.map_or(at, |l| l.max(at)));
        }
    }
    out.sort_by(f64::total_cmp);
    (out, repeats, last_before)
}

pub(crate) async fn run(
    setup: &Setup,
    edges: usize,
    meetings: usize,
    rate: u64,
    seconds: u64,
    outage_s: u64,
) -> Figures {
    let mut store = TestRedis::start_appendonly().await;
    // The relays' own Redis: the bus of no BBB server (they take the edges).
    let own = TestRedis::start().await;
    let sink = Sink::start(Duration::ZERO).await;
    let pool = format!(
        "\n[fleet]\nenabled = true\nlease_ms = 30000\nspread = {}\n[store]\nurl = \"{}\"\n",
        setup.spread,
        store.url()
    );
    let mut relays = Vec::new();
    for _ in 0..2 {
        relays.push(Relay::start(setup, &own, &pool).await.0);
    }
    // The first instance takes the fleet lease (a start without a holder waits about a
    // lease): the run begins once it holds it.
    let mut c = store.conn().await.expect("store");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let held: bool = redis::cmd("EXISTS")
            .arg("hookrelay:fleet:lease")
            .query_async(&mut c)
            .await
            .unwrap_or(false);
        if held {
            break;
        }
        assert!(Instant::now() < deadline, "no relay took the fleet lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut started: Vec<Edge> = Vec::with_capacity(edges);
    for i in 0..edges {
        started.push(start_edge(setup, &store, i).await);
    }
    // Each server's meetings, then one hook for each meeting.
    for (i, e) in started.iter().enumerate() {
        for k in 0..meetings {
            let created = meeting_created(&format!("m{k}"), &format!("ext-bbb{i}-{k}"));
            e.bbb.publish(&created).await;
        }
    }
    let http = crate::support::relay::http_client();
    for i in 0..edges {
        for k in 0..meetings {
            let relay = &relays[(i + k) % relays.len()];
            crate::support::relay::create_hook(
                &http,
                relay.api,
                &sink.url(&format!("/bbb{i}/{k}")),
                &format!("meetingID=ext-bbb{i}-{k}"),
            )
            .await;
        }
    }
    // The hooks reach every instance, the meetings every mapping.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu = |pids: &[u32]| -> f64 {
        pids.iter()
            .filter_map(|p| procstat::cpu_seconds(*p))
            .sum::<f64>()
    };
    let relay_pids: Vec<u32> = relays.iter().map(Relay::pid).collect();
    let edge_pids: Vec<u32> = started.iter().filter_map(|e| e.child.id()).collect();
    let (relay_cpu0, edge_cpu0) = (cpu(&relay_pids), cpu(&edge_pids));
    let drivers: Vec<_> = (started.iter().enumerate())
        .map(|(i, e)| tokio::spawn(drive(e.bbb.url(), i, meetings, rate, seconds)))
        .collect();
    let back_at = outage(&mut store, seconds, outage_s).await;
    let mut sent = std::collections::HashMap::new();
    for d in drivers {
        sent.extend(d.await.unwrap_or_default());
    }
    let published = sent.len();
    let deadline = Instant::now() + Duration::from_secs(180);
    while sink.count() < published && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Repeats, if any, come in the next moments.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (relay_cpu, edge_cpu) = (cpu(&relay_pids) - relay_cpu0, cpu(&edge_pids) - edge_cpu0);
    let (lat, repeats, _) = latencies(&sent, &sink, None);
    let delivered = lat.len();
    let mut f = Figures {
        ok: delivered == published && repeats == 0,
        ..Figures::default()
    };
    f.push("published", published as f64);
    f.push("lost", published.saturating_sub(delivered) as f64);
    f.push("repeated", repeats as f64);
    f.push("p50_ms", percentile(&lat, 0.5));
    f.push("p99_ms", percentile(&lat, 0.99));
    f.push(
        "relay_cpu_us_per_event",
        relay_cpu * 1e6 / published.max(1) as f64,
    );
    f.push(
        "edge_cpu_us_per_message",
        edge_cpu * 1e6 / published.max(1) as f64,
    );
    if let Some(back) = back_at {
        let (after, _, last_before) = latencies(&sent, &sink, Some(back));
        let caught_up =
            last_before.map_or(0.0, |l| l.saturating_duration_since(back).as_secs_f64());
        f.push("caught_up_s", caught_up);
        f.push("p99_after_ms", percentile(&after, 0.99));
    }
    for mut e in started {
        let _ = e.child.start_kill();
        let _ = e.child.wait().await;
    }
    for r in relays {
        r.kill9().await;
    }
    f
}

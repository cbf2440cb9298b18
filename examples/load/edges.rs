//! The edges scenario (docs/pool.md): N edges on loopback, each on a BBB "server" of its own
//! (a redis-server) publishing at a fixed rate, all appending to one pool store. Measures the
//! latency from publish to the pool's stream (the stream entry's id is the store's clock, this
//! machine's), loss (goal 0), each edge's CPU per message and peak RSS; with `--outage-s`, the
//! store is stopped that long mid-run: the time to catch up once it is back, and the latency
//! of what was published after.

use std::time::{Duration, Instant};

use crate::{
    launch::Setup,
    procstat,
    scenario::Figures,
    support::{TestRedis, free_port},
};

/// One edge process and its server.
pub(crate) struct Edge {
    pub bbb: TestRedis,
    pub child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

pub(crate) async fn start_edge(setup: &Setup, store: &TestRedis, i: usize) -> Edge {
    let bbb = TestRedis::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("edge.toml");
    std::fs::write(
        &config,
        format!(
            "[redis]\nurl = \"{}\"\n[metrics]\nbind = \"127.0.0.1:{}\"\n[edge]\nstore_url = \"{}\"\nserver = \"bbb{i}\"\n",
            bbb.url(),
            free_port(),
            store.url()
        ),
    )
    .expect("config");
    let child = tokio::process::Command::new(&setup.bin)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the relay binary");
    while !bbb.has_subscriber().await {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Edge {
        bbb,
        child,
        _dir: dir,
    }
}

/// A message of `n`, published at `ms` since the epoch (microseconds after the point).
fn message(n: usize, ms: f64) -> String {
    format!(r#"{{"envelope":{{"name":"Probe"}},"core":{{"body":{{"n":{n},"t":{ms:.3}}}}}}}"#)
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// A connection to the bus at `bbb_url`, how many messages each tick of 10 ms publishes for
/// `rate` a second, and the ticks.
pub(crate) async fn publisher(
    bbb_url: String,
    rate: u64,
) -> (
    redis::aio::MultiplexedConnection,
    usize,
    tokio::time::Interval,
) {
    let client = redis::Client::open(bbb_url).expect("client");
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("bbb");
    let per_tick = (rate / 100).max(1) as usize;
    (
        conn,
        per_tick,
        tokio::time::interval(Duration::from_millis(10)),
    )
}

/// With `outage_s`, stops `store` a third into a run of `seconds` for that long; when it was
/// back.
pub(crate) async fn outage(store: &mut TestRedis, seconds: u64, outage_s: u64) -> Option<Instant> {
    if outage_s == 0 {
        return None;
    }
    tokio::time::sleep(Duration::from_secs(seconds / 3)).await;
    store.stop().await;
    tokio::time::sleep(Duration::from_secs(outage_s)).await;
    store.start_again().await;
    Some(Instant::now())
}

/// Publishes `rate` messages a second for `seconds` on `bbb`, in ticks of 10 ms.
async fn drive(bbb_url: String, rate: u64, seconds: u64) -> usize {
    let (mut conn, per_tick, mut tick) = publisher(bbb_url, rate).await;
    let mut n = 0;
    for _ in 0..seconds * 100 {
        tick.tick().await;
        let mut pipe = redis::pipe();
        let t = now_ms();
        for _ in 0..per_tick {
            pipe.publish("from-akka-apps-redis-channel", message(n, t))
                .ignore();
            n += 1;
        }
        let () = pipe.query_async(&mut conn).await.expect("publish");
    }
    n
}

/// What the store's streams hold: each message's latency to the store (ms) of those published
/// after `after_ms` only, how many there are, whether each stream is in order, once, and when
/// the last of those published before `after_ms` arrived (ms since the epoch).
async fn latencies(store: &TestRedis, edges: usize, after_ms: f64) -> (Vec<f64>, usize, bool, f64) {
    let mut c = store.conn().await.expect("store");
    let (mut out, mut count, mut ordered, mut last_before) = (Vec::new(), 0, true, 0.0f64);
    for i in 0..edges {
        let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(format!("hookrelay:edge:{{bbb{i}}}:bus"))
            .arg("-")
            .arg("+")
            .query_async(&mut c)
            .await
            .unwrap_or_default();
        count += raw.len();
        for (k, (id, fields)) in raw.iter().enumerate() {
            let Some(p) = fields.chunks(2).find(|p| p[0] == "p").map(|p| &p[1]) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(p).unwrap_or_default();
            ordered &= v["core"]["body"]["n"].as_u64() == Some(k as u64);
            let sent = v["core"]["body"]["t"].as_f64().unwrap_or(0.0);
            let at: f64 = id
                .split('-')
                .next()
                .and_then(|ms| ms.parse().ok())
                .unwrap_or(0.0);
            if sent >= after_ms {
                out.push((at - sent).max(0.0));
            } else {
                last_before = last_before.max(at);
            }
        }
    }
    out.sort_by(f64::total_cmp);
    (out, count, ordered, last_before)
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => sorted[((n as f64 * p) as usize).min(n - 1)],
    }
}

pub(crate) async fn run(
    setup: &Setup,
    edges: usize,
    rate: u64,
    seconds: u64,
    outage_s: u64,
) -> Figures {
    let mut store = TestRedis::start_appendonly().await;
    let mut started = Vec::with_capacity(edges);
    for i in 0..edges {
        started.push(start_edge(setup, &store, i).await);
    }
    let cpu_before: Vec<f64> = (started.iter())
        .map(|e| e.child.id().and_then(procstat::cpu_seconds).unwrap_or(0.0))
        .collect();
    let drivers: Vec<_> = (started.iter())
        .map(|e| tokio::spawn(drive(e.bbb.url(), rate, seconds)))
        .collect();
    let back_at = outage(&mut store, seconds, outage_s)
        .await
        .map(|_| now_ms());
    let mut published = 0;
    for d in drivers {
        published += d.await.unwrap_or(0);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut lat, mut count, mut ordered, _) = latencies(&store, edges, 0.0).await;
    while count < published && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        (lat, count, ordered, _) = latencies(&store, edges, 0.0).await;
    }
    let cpu: f64 = (started.iter().zip(&cpu_before))
        .map(|(e, before)| e.child.id().and_then(procstat::cpu_seconds).unwrap_or(0.0) - before)
        .sum();
    let rss = (started.iter())
        .filter_map(|e| e.child.id().and_then(procstat::peak_rss_kib))
        .max()
        .unwrap_or(0);
    let mut f = Figures {
        ok: count == published && ordered,
        ..Figures::default()
    };
    f.push("published", published as f64);
    f.push("lost", published.saturating_sub(count) as f64);
    f.push("p50_ms", percentile(&lat, 0.5));
    f.push("p99_ms", percentile(&lat, 0.99));
    f.push(
        "edge_cpu_us_per_message",
        cpu * 1e6 / published.max(1) as f64,
    );
    f.push("edge_peak_rss_mib", rss as f64 / 1024.0);
    if let Some(back_ms) = back_at {
        // From the store's return to the arrival of the last message published before it.
        let (after, _, _, last_before) = latencies(&store, edges, back_ms).await;
        f.push("caught_up_s", (last_before - back_ms).max(0.0) / 1e3);
        f.push("p99_after_ms", percentile(&after, 0.99));
    }
    for mut e in started {
        let _ = e.child.start_kill();
        let _ = e.child.wait().await;
    }
    f
}

//! The scenarios: each starts its own Redis and relay, measures, checks order and completeness,
//! and returns named figures.

use std::time::{Duration, Instant};

use crate::{
    Scenario,
    launch::{Relay, Setup},
    procstat,
    sink::Sink,
    support::{TestRedis, cluster::TestCluster, user_joined},
};

/// Named figures of one run, and whether every check passed.
#[derive(Clone, Default)]
pub(crate) struct Figures {
    pub values: Vec<(&'static str, f64)>,
    pub ok: bool,
}

impl Figures {
    pub(crate) fn push(&mut self, name: &'static str, value: f64) {
        self.values.push((name, value));
    }

    /// The value named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }

    pub(crate) fn line(&self) -> String {
        let mut s: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={}", fmt(*v)))
            .collect();
        s.push(format!("checks={}", if self.ok { "ok" } else { "FAILED" }));
        s.join(" ")
    }

    pub(crate) fn ratio_line(&self, old: &Figures) -> String {
        self.values
            .iter()
            .zip(&old.values)
            .map(|((k, new), (_, old))| format!("{k}={:.2}", new / old))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Per-figure medians of several runs.
pub(crate) fn median(runs: &[Figures]) -> Figures {
    let mut out = Figures {
        ok: runs.iter().all(|r| r.ok),
        ..Figures::default()
    };
    if let Some(first) = runs.first() {
        for (i, (name, _)) in first.values.iter().enumerate() {
            let mut v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.values.get(i))
                .map(|x| x.1)
                .collect();
            v.sort_by(f64::total_cmp);
            out.push(name, v[v.len() / 2]);
        }
    }
    out
}

pub(crate) async fn run(scenario: &Scenario, setup: &Setup) -> Figures {
    match scenario.clone() {
        Scenario::Burst {
            events,
            hooks,
            slow_hooks,
            slow_ms,
        } => burst(setup, events, hooks, slow_hooks, slow_ms).await,
        Scenario::Open {
            rate,
            seconds,
            hooks,
        } => open_loop(setup, rate, seconds, hooks).await,
        Scenario::Restart { hooks, events } => restart(setup, hooks, events).await,
        Scenario::Idle { seconds, hooks } => idle(setup, seconds, hooks).await,
        Scenario::Baseline {
            requests,
            body_bytes,
        } => crate::baseline::run(requests, body_bytes).await,
        Scenario::PostLoop { .. } => unreachable!("run by main"),
        Scenario::Api { hooks, seconds } => crate::api::run(setup, hooks, seconds).await,
        Scenario::Tenancy { tenants } => crate::tenancy::run(setup, tenants).await,
        Scenario::Edges {
            edges,
            rate,
            seconds,
            outage_s,
        } => crate::edges::run(setup, edges, rate, seconds, outage_s).await,
        Scenario::Pool {
            edges,
            meetings,
            rate,
            seconds,
            outage_s,
        } => crate::pool::run(setup, edges, meetings, rate, seconds, outage_s).await,
        Scenario::Xapi { meetings, ralph } => crate::xapi::run(setup, meetings, ralph).await,
        Scenario::Destinations { events, rate } => {
            crate::destinations::run(setup, events, rate).await
        }
        Scenario::Outage { hooks, events } => crate::memory::outage(setup, hooks, events).await,
        Scenario::Meetings { meetings, users } => {
            crate::memory::meetings(setup, meetings, users).await
        }
        Scenario::Fanout { hooks, events } => crate::memory::fanout(setup, hooks, events).await,
        Scenario::SlowPlugin {
            rate,
            seconds,
            slow_hooks,
            plugin_ms,
            plugin_instances,
            plugin_crate,
            plugin_priority,
            slow_receiver_ms,
            idle_spinner,
        } => {
            let side = crate::plugins::Side {
                rate,
                total: (rate * seconds) as usize,
                slow_hooks,
                plugin_ms,
                instances: plugin_instances,
                plugin: plugin_crate,
                priority: plugin_priority,
                receiver_ms: slow_receiver_ms,
                idle_spinner,
            };
            crate::plugins::slow_plugin(setup, &side).await
        }
    }
}

pub(crate) fn messages(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| user_joined("int-load", &format!("w_{i}"), &format!("user {i}")))
        .collect()
}

/// Starts `n` receivers answering after `delay`, each registered as a global hook.
pub(crate) async fn sinks(relay: &Relay, n: usize, delay: Duration, tag: &str) -> Vec<Sink> {
    let mut out = Vec::new();
    for i in 0..n {
        let s = Sink::start(delay).await;
        relay.create_hook(&s.url(&format!("/{tag}/{i}"))).await;
        out.push(s);
    }
    out
}

/// Waits until every sink has `n` callbacks (or five minutes passed).
pub(crate) async fn wait_all(sinks: &[Sink], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while sinks.iter().any(|s| s.count() < n) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// True when the sink got exactly callbacks 0..n, in order (or a prefix of them when `prefix`).
pub(crate) fn in_order(sink: &Sink, n: usize, prefix: bool) -> bool {
    let got = sink.arrivals();
    let numbers_ok = got.iter().enumerate().all(|(i, (_, u))| *u == Some(i));
    numbers_ok && (got.len() == n || (prefix && got.len() <= n))
}

async fn burst(
    setup: &Setup,
    events: usize,
    hooks: usize,
    slow_hooks: usize,
    slow_ms: u64,
) -> Figures {
    let redis = TestRedis::start_with(setup.redis_args.clone()).await;
    let cluster = if setup.cluster_store {
        Some(TestCluster::start().await)
    } else {
        None
    };
    let store = cluster
        .as_ref()
        .map_or(String::new(), TestCluster::store_config);
    let extra = format!("max_queue = {events}\n{store}");
    let (relay, _) = Relay::start(setup, &redis, &extra).await;
    // The first instance takes the fleet lease before the others start.
    tokio::time::sleep(Duration::from_millis(if setup.instances > 1 {
        500
    } else {
        0
    }))
    .await;
    let mut others = Vec::new();
    for _ in 1..setup.instances {
        others.push(Relay::start(setup, &redis, &extra).await.0);
    }
    relay.tenant_meeting(&redis).await;
    let fast = sinks(&relay, hooks, Duration::ZERO, "fast").await;
    let slow = sinks(&relay, slow_hooks, Duration::from_millis(slow_ms), "slow").await;
    if setup.instances > 1 && setup.spread {
        // The instances take their share of the hooks' delivery leases.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let msgs = messages(events);
    let redis_cpu = || {
        let nodes = cluster.iter().flat_map(|c| &c.nodes);
        std::iter::once(&redis)
            .chain(nodes)
            .map(|r| r.pid().and_then(procstat::cpu_seconds).unwrap_or(0.0))
            .sum::<f64>()
    };
    let relays_cpu = || {
        std::iter::once(&relay)
            .chain(&others)
            .map(|r| procstat::cpu_seconds(r.pid()).unwrap_or(0.0))
            .sum::<f64>()
    };
    let first_cpu = || procstat::cpu_seconds(relay.pid()).unwrap_or(0.0);
    let cpu0 = relays_cpu();
    let first0 = first_cpu();
    let redis0 = redis_cpu();
    crate::commandstats::reset(&redis).await;
    let parts = procstat::RssPeaks::start(relay.pid());
    let start = Instant::now();
    redis.publish_all(&msgs).await;
    wait_all(&fast, events).await;
    let elapsed = start.elapsed().as_secs_f64();
    let (anon, file) = parts.stop();
    let commands = crate::commandstats::read(&redis).await;
    let cpu = relays_cpu() - cpu0;
    let first = first_cpu() - first0;
    let redis_cpu = redis_cpu() - redis0;
    let rss = procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0;
    let mut f = Figures {
        ok: fast.iter().all(|s| in_order(s, events, false))
            && slow.iter().all(|s| in_order(s, events, true)),
        ..Figures::default()
    };
    f.push("callbacks_per_s", (events * hooks) as f64 / elapsed);
    f.push("events_per_s_per_hook", events as f64 / elapsed);
    f.push("relay_cpu_s", cpu);
    if setup.instances > 1 {
        // The first instance holds the fleet lease: it queues everything.
        f.push("first_relay_cpu_s", first);
    }
    f.push("redis_cpu_s", redis_cpu);
    let callbacks = events * hooks;
    f.push(
        "redis_cpu_us_per_callback",
        redis_cpu * 1e6 / callbacks.max(1) as f64,
    );
    f.push(
        "relay_cpu_us_per_callback",
        cpu * 1e6 / callbacks.max(1) as f64,
    );
    let calls: f64 = commands.iter().map(|c| c.calls).sum();
    f.push("redis_calls_per_callback", calls / callbacks.max(1) as f64);
    eprintln!(
        "redis commands per callback (commandstats): {}",
        crate::commandstats::per_callback(&commands, callbacks)
    );
    f.push("relay_peak_rss_mib", rss);
    f.push("relay_peak_anon_mib", anon);
    f.push("relay_peak_file_mib", file);
    if slow_hooks > 0 {
        let slow_got: usize = slow.iter().map(Sink::count).sum();
        f.push("slow_hook_callbacks", slow_got as f64 / slow_hooks as f64);
    }
    relay.kill9().await;
    for r in others {
        r.kill9().await;
    }
    if let ([sink], 0) = (fast.as_slice(), slow_hooks) {
        // The bare loop against the same receiver (the relay gone), bodies of the relay's size.
        let bytes = sink
            .first_body_len()
            .unwrap_or(crate::baseline::CALLBACK_BYTES);
        let posts = crate::baseline::measure(sink, events, bytes).await;
        f.ok &= posts.is_some();
        let posts = posts.unwrap_or(f64::NAN);
        f.push("baseline_posts_per_s", posts);
        f.push("ratio_to_baseline", events as f64 / elapsed / posts);
    }
    f
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn open_loop(setup: &Setup, rate: u64, seconds: u64, hooks: usize) -> Figures {
    let total = (rate * seconds) as usize;
    let redis = TestRedis::start().await;
    let (relay, _) = Relay::start(setup, &redis, &format!("max_queue = {total}")).await;
    let sinks = sinks(&relay, hooks, Duration::ZERO, "open").await;
    let cpu0 = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0);
    let published = publish_at_rate(&redis, total, rate).await;
    wait_all(&sinks, total).await;
    let cpu = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0) - cpu0;
    let ok = sinks.iter().all(|s| in_order(s, total, false));
    let latencies = latencies(&sinks, &published);
    let mut f = Figures {
        ok,
        ..Figures::default()
    };
    f.push("p50_ms", percentile(&latencies, 50.0));
    f.push("p99_ms", percentile(&latencies, 99.0));
    f.push("max_ms", latencies.last().copied().unwrap_or(f64::NAN));
    f.push("relay_cpu_s", cpu);
    f.push(
        "relay_peak_rss_mib",
        procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    relay.kill9().await;
    f
}

/// Publishes [`messages`]`(total)` at `rate` a second; when each was published.
pub(crate) async fn publish_at_rate(redis: &TestRedis, total: usize, rate: u64) -> Vec<Instant> {
    let msgs = messages(total);
    let mut conn = redis.conn().await.expect("redis");
    let mut published: Vec<Instant> = Vec::with_capacity(total);
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    while published.len() < total {
        tick.tick().await;
        let due = ((start.elapsed().as_secs_f64() * rate as f64) as usize).min(total);
        if due <= published.len() {
            continue;
        }
        let mut pipe = redis::pipe();
        for m in &msgs[published.len()..due] {
            pipe.publish("from-akka-apps-redis-channel", m).ignore();
        }
        let now = Instant::now();
        published.resize(due, now);
        let () = pipe.query_async(&mut conn).await.expect("publish");
    }
    published
}

/// Latencies (ms, sorted) from publish to arrival of every callback `sinks` got.
pub(crate) fn latencies(sinks: &[Sink], published: &[Instant]) -> Vec<f64> {
    let mut out = Vec::new();
    for s in sinks {
        for (at, u) in s.arrivals() {
            if let Some(p) = u.and_then(|u| published.get(u)) {
                out.push(at.duration_since(*p).as_secs_f64() * 1000.0);
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

async fn restart(setup: &Setup, hooks: usize, events: usize) -> Figures {
    let redis = TestRedis::start().await;
    // The first relay never gets an answer, so everything stays queued.
    let hold = format!("max_queue = {events}\nrequest_timeout_ms = 600000");
    let (first, _) = Relay::start(setup, &redis, &hold).await;
    let mut sinks = Vec::new();
    for i in 0..hooks {
        let s = Sink::start(Duration::ZERO).await;
        s.hold(true);
        first.create_hook(&s.url(&format!("/r/{i}"))).await;
        sinks.push(s);
    }
    redis.publish_all(&messages(events)).await;
    let want = hooks * events;
    let deadline = Instant::now() + Duration::from_secs(300);
    while queued(&redis, hooks).await < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let was_queued = queued(&redis, hooks).await;
    first.kill9().await;
    for s in &sinks {
        s.hold(false);
    }
    let (second, subscribed) = Relay::start(setup, &redis, &format!("max_queue = {events}")).await;
    let started = Instant::now() - subscribed;
    wait_all(&sinks, events).await;
    let firsts: Vec<Instant> = sinks.iter().filter_map(Sink::first_arrival).collect();
    let lasts: Vec<Instant> = sinks.iter().filter_map(Sink::last_arrival).collect();
    let since = |t: Option<&Instant>| {
        t.map_or(f64::NAN, |t| {
            t.duration_since(started).as_secs_f64() * 1000.0
        })
    };
    let mut f = Figures {
        ok: was_queued == want && sinks.iter().all(|s| in_order(s, events, false)),
        ..Figures::default()
    };
    f.push("queued", was_queued as f64);
    f.push("subscribed_ms", subscribed.as_secs_f64() * 1000.0);
    f.push("first_callback_ms", since(firsts.iter().min()));
    f.push("all_delivered_ms", since(lasts.iter().max()));
    f.push(
        "relay_peak_rss_mib",
        procstat::peak_rss_kib(second.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    second.kill9().await;
    f
}

/// Entries in the queues of hooks 1..=hooks.
async fn queued(redis: &TestRedis, hooks: usize) -> usize {
    let Some(mut c) = redis.conn().await else {
        return 0;
    };
    let mut pipe = redis::pipe();
    for id in 1..=hooks {
        pipe.xlen(hookrelay::base::redis_keys::queue_key(
            hookrelay::base::ids::HookId(id as u64),
        ));
    }
    let lens: Vec<usize> = pipe.query_async(&mut c).await.unwrap_or_default();
    lens.iter().sum()
}

async fn idle(setup: &Setup, seconds: u64, hooks: usize) -> Figures {
    let redis = TestRedis::start().await;
    let (relay, _) = Relay::start(setup, &redis, "").await;
    let _sinks = sinks(&relay, hooks, Duration::ZERO, "idle").await;
    let parts = procstat::RssPeaks::start(relay.pid());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu0 = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let cpu = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0) - cpu0;
    let (anon, file) = parts.stop();
    let mut f = Figures {
        ok: true,
        ..Figures::default()
    };
    f.push("idle_cpu_ms", cpu * 1000.0);
    f.push("idle_seconds", seconds as f64);
    f.push(
        "relay_peak_rss_mib",
        procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    f.push("relay_peak_anon_mib", anon);
    f.push("relay_peak_file_mib", file);
    // What an operator sees of an idle relay: its peak includes its start.
    f.push(
        "relay_rss_mib",
        procstat::rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    relay.kill9().await;
    f
}

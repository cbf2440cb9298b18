//! What callbacks and meetings cost in memory: Redis' `used_memory` and the relay's RSS per
//! queued callback while receivers are down (`outage`), per meeting (`meetings`), and the
//! relay's memory in a fan-out to many hooks on one receiver (`fanout`).

use std::time::{Duration, Instant};

use crate::{
    launch::{Relay, Setup},
    procstat,
    scenario::{Figures, in_order, messages, sinks, wait_all},
    sink::Sink,
    support::{TestRedis, meeting_created, user_joined},
};

/// Redis' `used_memory`, in bytes.
async fn used_memory(redis: &TestRedis) -> f64 {
    let mut conn = redis.conn().await.expect("redis");
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn rss_mib(relay: &Relay) -> f64 {
    procstat::rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0
}

/// Callbacks in the hooks' Redis streams.
async fn queued(redis: &TestRedis, ids: &[u64]) -> usize {
    let mut conn = redis.conn().await.expect("redis");
    let mut n = 0;
    for id in ids {
        let key = format!("{{bigbluebutton:webhooks:out:hook:{id}}}:queue");
        let old = format!("bigbluebutton:webhooks:out:queue:{id}");
        for k in [key, old] {
            let len: usize = redis::cmd("XLEN")
                .arg(&k)
                .query_async(&mut conn)
                .await
                .unwrap_or(0);
            n += len;
        }
    }
    n
}

/// `hooks` receivers hang (every attempt times out) while `events` arrive; once every callback
/// is queued, the bytes each takes; then the receivers come back: time until all arrived.
pub(crate) async fn outage(setup: &Setup, hooks: usize, events: usize) -> Figures {
    let redis = TestRedis::start().await;
    let extra = format!("max_queue = {events}\nrequest_timeout_ms = 60000\n");
    let (relay, _) = Relay::start(setup, &redis, &extra).await;
    let down = sinks(&relay, hooks, Duration::ZERO, "down").await;
    for s in &down {
        s.hold(true);
    }
    let ids: Vec<u64> = (1..=hooks as u64).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (redis0, rss0) = (used_memory(&redis).await, rss_mib(&relay));
    // One user joining again and again (under new names): one user mapping, so that Redis'
    // growth is the queues'.
    let msgs: Vec<String> = (0..events)
        .map(|i| user_joined("int-load", "w_0", &format!("user {i}")))
        .collect();
    redis.publish_all(&msgs).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    // Every callback queued (the one in flight per hook is in its stream too).
    while queued(&redis, &ids).await < hooks * events && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let callbacks = (hooks * events) as f64;
    let redis_bytes = (used_memory(&redis).await - redis0) / callbacks;
    let rss = rss_mib(&relay);
    let start = Instant::now();
    for s in &down {
        s.hold(false);
    }
    wait_all(&down, events).await;
    let mut f = Figures {
        ok: down.iter().all(|s| in_order(s, events, false)),
        ..Figures::default()
    };
    f.push("redis_bytes_per_callback", redis_bytes);
    f.push("relay_rss_mib_queued", rss);
    f.push(
        "relay_rss_bytes_per_callback",
        (rss - rss0) * 1048576.0 / callbacks,
    );
    f.push("drain_s", start.elapsed().as_secs_f64());
    relay.kill9().await;
    f
}

/// `meetings` meetings of `users` each begin (no hook): Redis bytes and relay RSS per meeting.
pub(crate) async fn meetings(setup: &Setup, meetings: usize, users: usize) -> Figures {
    let redis = TestRedis::start().await;
    let (relay, _) = Relay::start(setup, &redis, "").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (redis0, rss0) = (used_memory(&redis).await, rss_mib(&relay));
    let mut msgs = Vec::with_capacity(meetings * (users + 1));
    for m in 0..meetings {
        let mid = format!("int-{m}");
        msgs.push(meeting_created(&mid, &format!("ext-{m}")));
        for u in 0..users {
            msgs.push(user_joined(
                &mid,
                &format!("w_{m}_{u}"),
                &format!("user {u}"),
            ));
        }
    }
    redis.publish_all(&msgs).await;
    // Mappings and the conference state are written as the bus is processed.
    let mut last = f64::NAN;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let now = used_memory(&redis).await;
        if now == last || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let mut f = Figures {
        ok: true,
        ..Figures::default()
    };
    f.push("redis_bytes_per_meeting", (last - redis0) / meetings as f64);
    f.push(
        "relay_rss_bytes_per_meeting",
        (rss_mib(&relay) - rss0) * 1048576.0 / meetings as f64,
    );
    relay.kill9().await;
    f
}

/// `hooks` hooks on one receiver get `events` events each: the relay's RSS before, at its
/// peak, and per hook.
pub(crate) async fn fanout(setup: &Setup, hooks: usize, events: usize) -> Figures {
    let redis = TestRedis::start().await;
    let (relay, _) = Relay::start(setup, &redis, "").await;
    let sink = Sink::start(Duration::ZERO).await;
    for i in 0..hooks {
        relay.create_hook(&sink.url(&format!("/fan/{i}"))).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss0 = rss_mib(&relay);
    let start = Instant::now();
    redis.publish_all(&messages(events)).await;
    let want = hooks * events;
    let deadline = Instant::now() + Duration::from_secs(300);
    while sink.count() < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let peak = procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0;
    let mut f = Figures {
        ok: sink.count() == want,
        ..Figures::default()
    };
    f.push("callbacks_per_s", want as f64 / elapsed);
    f.push("relay_rss_mib_idle", rss0);
    f.push("relay_peak_rss_mib", peak);
    f.push("peak_kib_per_hook", (peak - rss0) * 1024.0 / hooks as f64);
    f.push("relay_rss_mib_after", rss_mib(&relay));
    relay.kill9().await;
    f
}

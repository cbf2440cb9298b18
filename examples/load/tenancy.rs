//! The tenancy scenario: N tenants configured, each registers one hook at its own host (one in
//! ten to a closed port, so that its attempts fail) and gets a meeting with a join. Measures a
//! tenant's `hooks/create` (sequential calls: its latency), the series the relay exports (with
//! a `tenant` label and in all), and what the audit costs Redis per record (`XADD` in `INFO
//! commandstats`, the stream's bytes per record).

use std::time::{Duration, Instant};

use crate::{
    launch::{Relay, Setup},
    procstat,
    scenario::Figures,
    sink::Sink,
    support::{TestRedis, meeting_created_with_metadata, user_joined},
};

pub(crate) async fn run(setup: &Setup, tenants: usize) -> Figures {
    let setup = Setup {
        tenants,
        ..setup.clone()
    };
    let redis = TestRedis::start().await;
    let sink = Sink::start(Duration::ZERO).await;
    let (relay, _) = Relay::start(&setup, &redis, "").await;
    let failing = |i: usize| i % 10 == 9;
    let started = Instant::now();
    for i in 0..tenants {
        let url = match failing(i) {
            true => format!("http://127.0.0.1:9/t{i}"),
            false => sink.url(&format!("/t{i}")),
        };
        relay.create_tenant_hook(i, &url).await;
    }
    let create_ms = started.elapsed().as_secs_f64() * 1e3 / tenants.max(1) as f64;
    let mut messages = Vec::new();
    for i in 0..tenants {
        let (mid, ext) = (format!("int-{i}"), format!("ext-{i}"));
        let tenant = serde_json::json!({ "tenant-id": crate::launch::tenant(i).0 });
        messages.push(meeting_created_with_metadata(&mid, &ext, &tenant));
        messages.push(user_joined(&mid, "u1", "n1"));
    }
    redis.publish_all(&messages).await;
    let want = 2 * (0..tenants).filter(|i| !failing(*i)).count();
    let deadline = Instant::now() + Duration::from_secs(120);
    while sink.count() < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The failing hooks' first attempts are made within the first retry interval.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let text = match relay.metrics {
        Some(addr) => crate::support::relay::http_client()
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text"),
        None => String::new(),
    };
    let series: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let with_tenant = series.iter().filter(|l| l.contains("tenant=\"t")).count();
    let (xadd_calls, xadd_usec) = xadd_stats(&redis).await;
    let (records, bytes) = audit_size(&redis).await;
    let mut f = Figures {
        ok: sink.count() >= want && records >= tenants,
        ..Figures::default()
    };
    f.push("tenant_create_ms", create_ms);
    f.push("delivered", sink.count() as f64);
    f.push("series", series.len() as f64);
    f.push("series_with_tenant", with_tenant as f64);
    f.push("audit_records", records as f64);
    f.push(
        "audit_bytes_per_record",
        bytes as f64 / records.max(1) as f64,
    );
    f.push("xadd_calls", xadd_calls);
    f.push("xadd_usec_per_call", xadd_usec);
    f.push(
        "relay_peak_rss_mib",
        procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    relay.kill9().await;
    f
}

/// `XADD`'s calls and microseconds per call, from `INFO commandstats`.
async fn xadd_stats(redis: &TestRedis) -> (f64, f64) {
    let stats = crate::commandstats::read(redis).await;
    stats
        .iter()
        .find(|c| c.name == "xadd")
        .map_or((0.0, 0.0), |c| (c.calls, c.usec / c.calls.max(1.0)))
}

/// The audit stream's records and bytes (`XLEN`, `MEMORY USAGE`).
async fn audit_size(redis: &TestRedis) -> (usize, u64) {
    let Some(mut c) = redis.conn().await else {
        return (0, 0);
    };
    let key = hookrelay::base::redis_keys::AUDIT;
    let len: usize = redis::cmd("XLEN")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap_or(0);
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap_or(0);
    (len, bytes)
}
